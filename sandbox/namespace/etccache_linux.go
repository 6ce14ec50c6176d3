//go:build linux && (amd64 || arm64)

package namespace

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The prepared /etc is built once and shared: a directory named by a hash
// of what it is made of (the names, modes, sizes, times and link targets of
// the host entries it copies, and the synthesized files), below a directory
// that belongs to this user, so that a later codeagent, or another one
// running now, finds it ready. Computing the hash is a walk of a few hundred
// entries; copying them (alternatives, fonts) took about 150 ms per start.

// etcFormat changes when the way /etc is prepared changes.
const etcFormat = "etc-v1"

// completeMark is written last into a prepared /etc that is whole.
const completeMark = ".codeagent-complete"

// sharedEtc returns the prepared /etc for this host below base, building it
// when no whole copy with the same hash exists. Copies of other hashes that
// nobody used for a day are removed.
func sharedEtc(base string) (string, error) {
	sum, err := etcFingerprint()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, "etc-"+sum[:16])
	now := time.Now()
	if fi, err := os.Lstat(filepath.Join(dir, completeMark)); err == nil && fi.Mode().IsRegular() {
		_ = os.Chtimes(filepath.Join(dir, completeMark), now, now) // in use: keep it
		return dir, nil
	}
	tmp, err := prepareEtc(base)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, completeMark), []byte(sum+"\n"), 0o644); err != nil {
		_ = os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		if _, serr := os.Lstat(filepath.Join(dir, completeMark)); serr != nil {
			return "", fmt.Errorf("keep the prepared /etc: %w", err)
		}
		// Another codeagent made it first.
	}
	removeStaleEtc(base, dir, now.Add(-24*time.Hour))
	return dir, nil
}

// etcFingerprint hashes what prepareEtc would copy and write.
func etcFingerprint() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", etcFormat)
	for _, n := range etcNames() {
		err := filepath.WalkDir(filepath.Join("/etc", n), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err != nil {
				return nil
			}
			fmt.Fprintf(h, "%s %o %d %d.%d", p, st.Mode, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
			if d.Type()&fs.ModeSymlink != 0 {
				t, _ := os.Readlink(p)
				fmt.Fprintf(h, " -> %s", t)
			}
			h.Write([]byte{'\n'})
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	keys := make([]string, 0, len(etcSynthesized))
	for k := range etcSynthesized {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "synth %s %q\n", k, etcSynthesized[k])
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// removeStaleEtc removes prepared /etc copies below base, other than keep,
// whose mark was not touched since before.
func removeStaleEtc(base, keep string, before time.Time) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(base, e.Name())
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "etc-") || p == keep {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(p, completeMark)); err == nil && fi.ModTime().Before(before) {
			_ = os.RemoveAll(p)
		}
	}
}

// userCacheBase returns a directory for the shared /etc of an ordinary
// user: $XDG_CACHE_HOME/codeagent (or ~/.cache/codeagent), which must be
// the user's own and closed to others, or "" when there is none.
func userCacheBase() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	dir = filepath.Join(dir, "codeagent")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ""
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR ||
		int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return ""
	}
	return dir
}
