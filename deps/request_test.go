package deps

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNormalizeRequirements(t *testing.T) {
	r, err := Request{Python: []string{"Sea_Bird == 1.0", "gull>=0.5,<1", "gull<1,>=0.5", "pandas[Excel,all]"}}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gull<1,>=0.5", "pandas[all,excel]", "sea-bird==1.0"}
	if strings.Join(r.Python, " ") != strings.Join(want, " ") || r.IndexURL != DefaultIndexURL {
		t.Errorf("normalised %+v, want %v and the default index", r, want)
	}
	a, _ := r.Key("namespace/amd64")
	b, _ := Request{Python: []string{"sea-bird==1.0", "gull >=0.5, <1", "PANDAS[all,excel]"}}.Normalize()
	kb, _ := b.Key("namespace/amd64")
	kc, _ := b.Key("docker/amd64")
	if a != kb || a == kc {
		t.Errorf("keys: %s and %s should be equal, %s differ", a, kb, kc)
	}
}

// What would let a requirement escape the index the user named, or run
// pip's options, is refused with the line named.
func TestRequirementsRefused(t *testing.T) {
	for _, bad := range []string{
		"-r other.txt", "--index-url http://evil/simple", "-e .", "pkg @ https://evil/pkg.whl",
		"./local/pkg", "/abs/pkg.whl", "pkg; python_version<'3'", "git+https://x/y", "pkg==1.0 --hash=sha256:00",
	} {
		if _, err := (Request{Python: []string{bad}}).Normalize(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", bad, err)
		}
		_, err := ParseRequirements(strings.NewReader("# deps\nnumpy\n\n" + bad + "\n"))
		if err == nil || !strings.Contains(err.Error(), "line 4") {
			t.Errorf("file with %q: %v, want an error naming line 4", bad, err)
		}
	}
	got, err := ParseRequirements(strings.NewReader("seaborn==0.13.2  # plots\n\n# comment\nscipy>=1.10\n"))
	if err != nil || strings.Join(got, ",") != "seaborn==0.13.2,scipy>=1.10" {
		t.Errorf("parsed %q, %v", got, err)
	}
	for _, bad := range []string{"ftp://x/simple", "http://user:pw@x/simple", "file:///etc", "simple"} {
		if _, err := (Request{Python: []string{"a"}, IndexURL: bad}).Normalize(); !errors.Is(err, ErrInvalid) {
			t.Errorf("index %q: %v, want ErrInvalid", bad, err)
		}
	}
}

// A wheelhouse reached through a link of the user's is used where it
// leads.
func TestFindLinksThroughALink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "wheels")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	r, err := Request{Python: []string{"a"}, FindLinks: filepath.Join(dir, "link")}.Normalize()
	if err != nil || r.FindLinks != real {
		t.Errorf("find-links %q, %v; want %s", r.FindLinks, err, real)
	}
}
