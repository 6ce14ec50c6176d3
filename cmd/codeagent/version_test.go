package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// TestDescribeBuild: version names the build: a release's tag; a clone's
// revision, its time and uncommitted changes (it said "(devel)" alone, or
// only a pseudo-version when the revision was in it); and a build that
// recorded neither says why.
func TestDescribeBuild(t *testing.T) {
	vcs := func(rev, at, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: at}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "3576124262b829422cee318ce3eb69aa46d088ef"
	for _, c := range []struct {
		link string
		info debug.BuildInfo
		want string
	}{
		{"", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0, go1.26.8"},
		{"", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261207164033-3576124262b8"},
			Settings: vcs(rev, "2026-12-07T16:40:33Z", "false")},
			"v0.0.0-20261207164033-3576124262b8, revision 3576124262b8, 2026-12-07T16:40:33Z, go1.26.8"},
		{"", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "2026-12-07T16:40:33Z", "true")},
			"(devel), revision 3576124262b8, 2026-12-07T16:40:33Z, modified, go1.26.8"},
		{"", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"(devel), no revision recorded (built outside a git clone, or with -buildvcs=false), go1.26.8"},
		{"v2.0.0", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "2026-12-07T16:40:33Z", "false")},
			"v2.0.0, revision 3576124262b8, 2026-12-07T16:40:33Z, go1.26.8"},
	} {
		if got := describeBuild(c.link, &c.info, true); got != c.want {
			t.Errorf("describeBuild(%q, %+v):\n got %s\nwant %s", c.link, c.info, got, c.want)
		}
	}
}

// TestVersionThroughTheBinary: `codeagent --version` works (it was an
// unknown command) and says what `codeagent version` says, which is what
// the toolchain recorded in the binary (go version -m): the revision, its
// time and "modified" when it recorded them (a build in a git clone, as
// CI's), else that it recorded none, never "(devel)" alone. A build with
// -buildvcs=false is the second case wherever the tests run.
func TestVersionThroughTheBinary(t *testing.T) {
	plain := filepath.Join(t.TempDir(), "codeagent")
	if out, err := exec.Command("go", "build", "-buildvcs=false", "-o", plain, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, bin := range []string{mcpBinary(t), plain} {
		out, err := exec.Command("go", "version", "-m", bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		settings := map[string]string{}
		for _, m := range regexp.MustCompile(`(?m)^\tbuild\t(vcs\.\w+)=(\S*)$`).FindAllStringSubmatch(string(out), -1) {
			settings[m[1]] = m[2]
		}
		code, version, errOut := runBinaryIn(t, bin, "version")
		if code != 0 || errOut != "" || !strings.HasPrefix(version, "codeagent ") {
			t.Fatalf("%s version: exit %d, %q, %s", bin, code, version, errOut)
		}
		if code, v2, _ := runBinaryIn(t, bin, "--version"); code != 0 || v2 != version {
			t.Errorf("--version: exit %d, %q; version said %q", code, v2, version)
		}
		rev := settings["vcs.revision"]
		switch {
		case rev != "":
			if !strings.Contains(version, "revision "+rev[:12]+", "+settings["vcs.time"]) ||
				strings.Contains(version, "modified") != (settings["vcs.modified"] == "true") {
				t.Errorf("the build recorded %v; version says %q", settings, version)
			}
		case !strings.Contains(version, "no revision recorded"):
			t.Errorf("the build recorded no revision; version says %q", version)
		}
		t.Logf("%s: %s", filepath.Base(filepath.Dir(bin)), strings.TrimSpace(version))
	}
}

// runBinaryIn runs bin with args in an empty folder.
func runBinaryIn(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = os.Environ()
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	_ = cmd.Run()
	if cmd.ProcessState == nil {
		t.Fatalf("%s %v did not run", bin, args)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}
