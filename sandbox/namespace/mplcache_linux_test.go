//go:build linux && (amd64 || arm64)

package namespace

import (
	"context"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/sandbox"
)

// TestMatplotlibFontListIsReadyAndPrivate: a Python sandbox starts with
// matplotlib's font list in place (no rebuild), and what one program writes
// there never reaches the next.
func TestMatplotlibFontListIsReadyAndPrivate(t *testing.T) {
	b := newTestBackend(t)
	if b.mpl == nil {
		t.Skip("matplotlib is not installed here")
	}
	run := func(code string) string {
		t.Helper()
		res, err := b.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "-c", code}, Workspace: t.TempDir(),
			Env: map[string]string{"MPLBACKEND": "Agg"}})
		if err != nil || res.Status != sandbox.StatusOK {
			t.Fatalf("%v %s %s", err, res.Status, res.Stderr)
		}
		return string(res.Stdout)
	}
	out := run(`import glob, os, matplotlib.font_manager as fm
f = glob.glob('/tmp/.cache/matplotlib/fontlist-v*.json')
print(len(f), len(fm.fontManager.ttflist) > 0)
open(f[0], 'w').write('poisoned')`)
	if strings.TrimSpace(out) != "1 True" {
		t.Fatalf("font list in the sandbox: %q", out)
	}
	if out := run(`import glob; print(open(glob.glob('/tmp/.cache/matplotlib/fontlist-v*.json')[0]).read(8))`); strings.Contains(out, "poisoned") {
		t.Fatal("one program's change of the font list reached the next")
	}
}
