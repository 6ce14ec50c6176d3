package sandboxtest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/sandbox"
)

// bindPath is where the suite binds its dependency directory.
const bindPath = sandbox.BindRoot + "/python"

// bindSource makes a dependency directory as an installer leaves it
// (0755 and 0644, readable by all): a file and a Python module.
func bindSource(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "deps")
	files := map[string]string{"hello.txt": "hi", "depmod.py": "VALUE = 42\n"}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// boundProgram is Python code run with dir bound at bindPath and on its
// PYTHONPATH.
func boundProgram(dir, code string) program {
	return program{lang: "python", code: code, env: map[string]string{"PYTHONPATH": bindPath},
		binds: []sandbox.Bind{{Source: dir, Path: bindPath}}}
}

// executeBound runs p, which binds. A backend that cannot bind may refuse
// it with ErrInvalidSpec (the contract's only other answer): the test then
// skips.
func executeBound(t *testing.T, sb sandbox.Sandbox, p program) sandbox.Result {
	t.Helper()
	res, err := tryExecute(t, sb, p)
	if errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Skipf("the backend refuses binds: %v", err)
	}
	if err != nil {
		t.Fatalf("sandbox error: %v", err)
	}
	return res
}

// bindIsReadOnly: a bound directory can be read and imported from, and
// nothing the program tries changes it on the host.
func bindIsReadOnly(t *testing.T, sb sandbox.Sandbox) {
	dir := bindSource(t)
	before := HostState(t, dir)
	attempts := []string{
		"open('/deps/python/x', 'w').write('x')",
		"open('/deps/python/hello.txt', 'w').write('owned')",
		"os.mkdir('/deps/python/d')",
		"os.symlink('/etc/passwd', '/deps/python/link')",
		"os.chmod('/deps/python/hello.txt', 0o666)",
		"os.chmod('/deps/python', 0o777)",
		"os.utime('/deps/python/hello.txt')",
		"os.remove('/deps/python/hello.txt')",
		"os.rename('/deps/python/depmod.py', '/deps/python/moved.py')",
		"os.rmdir('/deps/python')",
		// The mount itself is read-only, not only the files' modes.
		"assert not os.statvfs('/deps/python').f_flag & os.ST_RDONLY",
	}
	code := "import depmod\nprint(open('/deps/python/hello.txt').read(), depmod.VALUE)\n" + leakCheck(attempts...)
	res := executeBound(t, sb, boundProgram(dir, code))
	if !strings.HasPrefix(string(res.Stdout), "hi 42\n") {
		t.Errorf("the bound file and module were not read: stdout %q, stderr %s", res.Stdout, res.Stderr)
	}
	wantAllBlocked(t, res, len(attempts))
	CheckHost(t, dir, before)
}

// bindDoesNotLinger: a later spec without binds, in whatever sandbox the
// backend has ready, sees nothing of an earlier spec's bind.
func bindDoesNotLinger(t *testing.T, sb sandbox.Sandbox) {
	res := executeBound(t, sb, boundProgram(bindSource(t), "import depmod; print(depmod.VALUE)"))
	wantStatus(t, res, sandbox.StatusOK)
	if string(res.Stdout) != "42\n" {
		t.Fatalf("the bound module was not imported: stdout %q, stderr %s", res.Stdout, res.Stderr)
	}
	res = execute(t, sb, program{lang: "python", code: "import os\np = '/deps/python'\nprint(sorted(os.listdir(p)) if os.path.isdir(p) else 'absent')\n"})
	wantStatus(t, res, sandbox.StatusOK)
	if got := string(res.Stdout); got != "absent\n" && got != "[]\n" {
		t.Fatalf("a spec without binds sees %s: %s", bindPath, got)
	}
}
