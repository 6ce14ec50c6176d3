//go:build linux && (amd64 || arm64)

// This file serves every Python sandbox, cold or warm (tmpFilesFor feeds
// bwrap's options for both), so it is not package warm's: it also reads
// the host (matplotlib's and the fonts' directories, the cache beside the
// shared /etc) and builds the font list by running a sandbox of the
// backend's own (Backend.Run), which package warm never does.

package namespace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// matplotlib builds a list of the host's fonts the first time it is
// imported and keeps it in $HOME/.cache/matplotlib; a fresh sandbox has an
// empty $HOME (/tmp), so every Python program that plots paid about 0.3 s
// for it. The backend builds the list once per host state, by running
// matplotlib in a sandbox of its own (never from what a program left), keeps
// it beside the shared /etc, and writes a copy into the /tmp of every Python
// sandbox, where matplotlib may still update it.

// tmpFile is a file written into a sandbox's /tmp before the program starts.
type tmpFile struct {
	path string // absolute, below /tmp
	data []byte
}

// mplCacheDir is matplotlib's cache directory in a sandbox with the
// default environment (HOME=/tmp).
const mplCacheDir = "/tmp/.cache/matplotlib"

// mplFingerprint names what the font list depends on: matplotlib's
// installed files, the font directories and fontconfig's settings.
func mplFingerprint() (string, bool) {
	h := sha256.New()
	found := false
	dirs, _ := filepath.Glob("/usr/lib/python3/dist-packages/matplotlib")
	more, _ := filepath.Glob("/usr/local/lib/python3*/dist-packages/matplotlib")
	for _, d := range append(dirs, more...) {
		if fi, err := os.Stat(d); err == nil {
			found = true
			fmt.Fprintf(h, "%s %d\n", d, fi.ModTime().UnixNano())
		}
	}
	for _, d := range []string{"/usr/share/fonts", "/usr/local/share/fonts", "/etc/fonts"} {
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				if fi, err := e.Info(); err == nil {
					fmt.Fprintf(h, "%s %d\n", p, fi.ModTime().UnixNano())
				}
			}
			return nil
		})
	}
	return hex.EncodeToString(h.Sum(nil))[:16], found
}

// prepareMplCache finds or builds the font list below base. It returns no
// file, and no error, when matplotlib is not installed or cannot run.
func (b *Backend) prepareMplCache(base string) *tmpFile {
	sum, ok := mplFingerprint()
	if !ok {
		return nil
	}
	dir := filepath.Join(base, "mpl-"+sum)
	if f := readMplCache(dir); f != nil {
		return f
	}
	ws, err := os.MkdirTemp("", "codeagent-mpl-")
	if err != nil {
		return nil
	}
	defer os.RemoveAll(ws)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := b.Run(ctx, sandbox.Spec{
		Command:   []string{"python3", "-c", "import matplotlib.font_manager"},
		Workspace: ws,
		Env:       map[string]string{"HOME": sandbox.WorkspacePath, "MPLBACKEND": "Agg"},
		Limits:    sandbox.Limits{WallTime: 60 * time.Second, Memory: 512 << 20},
	})
	if err != nil || res.Status != sandbox.StatusOK {
		b.log.Debug("matplotlib font list not prepared", "err", err, "status", res.Status)
		return nil
	}
	made, _ := filepath.Glob(filepath.Join(ws, ".cache", "matplotlib", "fontlist-v*.json"))
	if len(made) != 1 {
		return nil
	}
	data, err := os.ReadFile(made[0])
	if err != nil || len(data) == 0 || len(data) > 16<<20 {
		return nil
	}
	tmp, err := os.MkdirTemp(base, "mpl-build-")
	if err != nil {
		return nil
	}
	name := filepath.Base(made[0])
	if os.Chmod(tmp, 0o755) != nil || os.WriteFile(filepath.Join(tmp, name), data, 0o644) != nil || os.Rename(tmp, dir) != nil {
		_ = os.RemoveAll(tmp)
	}
	return &tmpFile{path: path.Join(mplCacheDir, name), data: data}
}

func readMplCache(dir string) *tmpFile {
	made, _ := filepath.Glob(filepath.Join(dir, "fontlist-v*.json"))
	if len(made) != 1 {
		return nil
	}
	data, err := os.ReadFile(made[0])
	if err != nil || len(data) == 0 {
		return nil
	}
	return &tmpFile{path: path.Join(mplCacheDir, filepath.Base(made[0])), data: data}
}

// tmpFilesFor are the files spec's sandbox gets in /tmp: the font list for
// a Python program that keeps the default HOME and cache directories.
func (b *Backend) tmpFilesFor(spec sandbox.Spec) []tmpFile {
	if b.mpl == nil || !strings.HasPrefix(path.Base(spec.Command[0]), "python") {
		return nil
	}
	for _, k := range []string{"HOME", "XDG_CACHE_HOME", "MPLCONFIGDIR"} {
		if _, set := spec.Env[k]; set {
			return nil
		}
	}
	return []tmpFile{*b.mpl}
}

// tmpFileOptions are bwrap's options writing files from descriptors fd,
// fd+1, ... after creating their directories.
func tmpFileOptions(files []tmpFile, fd int) []string {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.path
	}
	return fileOptions(paths, fd, "", "/tmp")
}
