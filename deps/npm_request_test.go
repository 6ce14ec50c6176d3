package deps

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/sandbox"
)

// pythonKeyA is the key of Request{Python: ["a"]} on platform "p", as it
// was before requests had JavaScript.
const pythonKeyA = "8c5149913863c6c278e52fc0691853a6"

func TestNormalizeNPM(t *testing.T) {
	r, err := Request{JavaScript: []string{" lodash@4.17.21", "@birds/emu@^1.2", "left-pad", "kiwi@>=1.0.0  <2"}}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"@birds/emu@^1.2", "kiwi@>=1.0.0 <2", "left-pad", "lodash@4.17.21"}
	if !slices.Equal(r.JavaScript, want) || r.NPMRegistry != DefaultNPMRegistry || r.IndexURL != "" {
		t.Errorf("normalised %+v, want %v, the default registry and no index", r, want)
	}
	if rules, err := r.AllowRules(); err != nil || !slices.Equal(rules, []string{"registry.npmjs.org:443"}) {
		t.Errorf("rules %v, %v", rules, err)
	}
	// A Python request keeps the key it had before JavaScript (its
	// environments stay found); JavaScript packages change it.
	py, _ := Request{Python: []string{"a"}}.Normalize()
	both, _ := Request{Python: []string{"a"}, JavaScript: []string{"a"}, NPMRegistry: "http://127.0.0.1:9/"}.Normalize()
	k1, _ := py.Key("p")
	k2, _ := both.Key("p")
	if k1 != pythonKeyA || k1 == k2 {
		t.Errorf("keys %s %s; want %s for Python alone", k1, k2, pythonKeyA)
	}
	if rules, _ := both.AllowRules(); !slices.Equal(rules, []string{"pypi.org:443", "files.pythonhosted.org:443", "127.0.0.1:9"}) {
		t.Errorf("rules of both %v", rules)
	}
	if name, err := NPMName("@birds/emu@^1.2"); name != "@birds/emu" || err != nil {
		t.Errorf("name %q, %v", name, err)
	}
}

// What would let npm fetch from elsewhere than the registry named, or
// take an option, is refused.
func TestNPMSpecsRefused(t *testing.T) {
	for _, bad := range []string{
		"--registry=http://evil/", "-g", "pkg@npm:other@1", "alias@npm:pkg", "pkg@file:../x", "file:../x", "../x", "./x",
		"/abs/x", "x.tgz", "pkg@x.tgz", "pkg@1.0.tar.gz", "user/repo", "github:user/repo", "pkg@github:u/r", "git+https://x/y.git",
		"pkg@git+ssh://x", "https://evil/x.tgz", "pkg@https://evil/x.tgz", "pkg@http://evil/x", "pkg@user/repo#v1",
		"pkg@~/x", "pkg@.", "@scope", "@scope/", "@Scope/x", "pkg@", "pkg@1;rm -rf /", "pkg@$(id)", "pkg@`id`", "",
	} {
		if _, err := (Request{JavaScript: []string{bad}}).Normalize(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := (Request{JavaScript: []string{"a@1", "a@2"}}).Normalize(); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("a package twice: %v", err)
	}
	for _, bad := range []string{"ftp://x/", "http://user:pw@x/", "file:///etc", "registry"} {
		if _, err := (Request{JavaScript: []string{"a"}, NPMRegistry: bad}).Normalize(); !errors.Is(err, ErrInvalid) {
			t.Errorf("registry %q: %v, want ErrInvalid", bad, err)
		}
	}
}

func TestParsePackageJSON(t *testing.T) {
	got, err := ParsePackageJSON(strings.NewReader(`{"name": "app", "dependencies": {"kiwi": "^1.0.0", "@birds/emu": "", "moa": "latest"},
		"devDependencies": {"jest": "29"}}`))
	if err != nil || !slices.Equal(got, []string{"@birds/emu", "kiwi@^1.0.0", "moa@latest"}) {
		t.Errorf("parsed %q, %v", got, err)
	}
	for _, bad := range []string{`{"dependencies": {"x": "file:../x"}}`, `{"dependencies": {"x": "npm:y@1"}}`, `{"dependencies": {"x": "user/repo"}}`, `not json`} {
		if _, err := ParsePackageJSON(strings.NewReader(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", bad, err)
		}
	}
}

// TestNPMErrorOfAnImageWithoutNPM: an image without npm (the wrapper's
// exit status and line) is said so, not reported as npm's failure.
func TestNPMErrorOfAnImageWithoutNPM(t *testing.T) {
	got := npmError("npm is not in the sandbox image\n", sandbox.Result{ExitCode: npmMissing, Status: sandbox.StatusError})
	if !strings.Contains(got, "npm is not in the sandbox image of this backend") {
		t.Errorf("got %q", got)
	}
}
