//go:build linux && (amd64 || arm64)

package namespace

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/sandboxtest"
)

// TestFilesReadOnly attacks the files a spec places (written into the
// sandbox's root, which is remounted read-only): a program tries to
// change, replace, remove and add to them, and to write beside them and
// in the root. Every attempt must fail, and the files must read as they
// were given. As root, then as an ordinary user.
func TestFilesReadOnly(t *testing.T) {
	code := `import os
attempts = [
    lambda: open('/code/main.py', 'a').write('x'),
    lambda: open('/code/lib/data.txt', 'w').write('x'),
    lambda: os.chmod('/code/lib/data.txt', 0o666),
    lambda: os.unlink('/code/lib/data.txt'),
    lambda: os.rename('/code/lib/data.txt', '/code/moved.txt'),
    lambda: open('/code/new.py', 'w').write('x'),
    lambda: os.mkdir('/code/dir'),
    lambda: os.symlink('/workspace', '/code/lib/link'),
    lambda: open('/evil', 'w').write('x'),
]
ok = 0
for i, a in enumerate(attempts):
    try:
        a()
        print('allowed', i)
    except OSError:
        ok += 1
print('blocked', ok, 'of', len(attempts))
print(open('/code/lib/data.txt').read(), oct(os.stat('/code/lib/data.txt').st_mode & 0o777))
`
	b := newTestBackend(t)
	ws := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := b.Run(ctx, sandbox.Spec{Command: []string{"python3", "/code/main.py"}, Workspace: ws,
		Files: []sandbox.File{{Path: "/code/main.py", Data: []byte(code)}, {Path: "/code/lib/data.txt", Data: []byte("given")}}})
	if err != nil || res.Status != sandbox.StatusOK {
		t.Fatalf("run: %v %s %s", err, res.Status, res.Stderr)
	}
	out := string(res.Stdout)
	if !strings.Contains(out, "blocked 9 of 9") || !strings.Contains(out, "given 0o444") {
		t.Fatalf("the program changed its files:\n%s%s", out, res.Stderr)
	}
	if os.Geteuid() == 0 && os.Getenv(asUserEnv) == "" {
		out, err := sandboxtest.AsUser(t, unprivilegedUID, unprivilegedUID, "^TestFilesReadOnly$", 2*time.Minute, asUserEnv+"=1")
		if err != nil {
			t.Fatalf("as uid %d: %v\n%s\nthe whole output:\n%s", unprivilegedUID, err, sandboxtest.FailureSummary(out), out)
		}
		t.Logf("as uid %d:\n%s", unprivilegedUID, out)
	}
}
