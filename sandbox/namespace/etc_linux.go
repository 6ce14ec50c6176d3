//go:build linux && (amd64 || arm64)

package namespace

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/codeagent/codeagent/procid"
)

// Prefixes of the backend's directories; each name also carries its
// process's tag (see procid.Tag), so that New removes those a dead process
// left and never those of a live one.
const (
	etcPrefix = "codeagent-etc-"
	mntPrefix = "codeagent-mnt-"
)

// sweepLeftovers removes the prepared /etc and mount directories that
// dead processes left in base.
func sweepLeftovers(base string) int {
	n := 0
	for _, p := range []string{etcPrefix, mntPrefix} {
		k, _ := procid.Sweep(base, p, nil)
		n += k
	}
	return n
}

// etcEntries are the host's /etc entries a runtime needs (dynamic linker,
// time zone, alternatives symlinks, fonts, Python and matplotlib settings).
// Nothing else of /etc is visible.
var etcEntries = []string{
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives",
	"fonts", "mime.types", "matplotlibrc", "nsswitch.conf",
}

// etcGlobs are patterns for versioned entries, e.g. python3.11.
var etcGlobs = []string{"python3*", "node*"}

// etcSynthesized are written for the sandbox so that user and host lookups
// work without the host's own files.
var etcSynthesized = map[string]string{
	"passwd":   "root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
	"group":    "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n",
	"hostname": "sandbox\n",
	"hosts":    "127.0.0.1 localhost sandbox\n::1 localhost\n",
}

// prepareEtc builds the sandbox's /etc once per backend, in a private
// directory below tmp that every sandbox binds read-only: one mount per
// execution instead of one per file. The copy reflects the host's /etc when
// the backend was created, with the trust store of ts (see prepareTrust).
func prepareEtc(tmp string, ts trustSource) (string, error) {
	dir, err := os.MkdirTemp(tmp, procid.Prefix(etcPrefix))
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	for _, n := range etcNames() {
		if err := copyTree(filepath.Join("/etc", n), filepath.Join(dir, n)); err != nil && !os.IsNotExist(err) {
			_ = os.RemoveAll(dir)
			return "", fmt.Errorf("copy /etc/%s: %w", n, err)
		}
	}
	if err := prepareTrust(dir, ts); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	for n, content := range etcSynthesized {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(content), 0o644); err != nil {
			_ = os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// etcNames are the host /etc entries the sandbox gets, sorted.
func etcNames() []string {
	names := append([]string(nil), etcEntries...)
	for _, g := range etcGlobs {
		m, _ := filepath.Glob(filepath.Join("/etc", g))
		for _, p := range m {
			names = append(names, filepath.Base(p))
		}
	}
	sort.Strings(names)
	return names
}

// copyTree copies regular files, directories and symlinks (as symlinks).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			return copyFile(path, target)
		}
		return nil // devices, sockets and FIFOs have no place in /etc
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
