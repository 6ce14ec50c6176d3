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
	"strconv"
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
const etcFormat = "etc-v3"

// completeMark is written last into a prepared /etc that is whole.
const completeMark = ".codeagent-complete"

// sharedEtc returns the prepared /etc for this host below base, with the
// trust store of ts, building it when no whole copy with the same hash
// exists. Copies of other hashes that nobody used for a day are removed.
func sharedEtc(base string, ts trustSource) (string, error) {
	sum, err := etcFingerprint(ts)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, "etc-"+sum[:16])
	now := time.Now()
	if fi, err := os.Lstat(filepath.Join(dir, completeMark)); err == nil && fi.Mode().IsRegular() {
		if now.Sub(fi.ModTime()) > time.Hour {
			_ = os.Chtimes(filepath.Join(dir, completeMark), now, now) // in use: keep it (for a day, see removeStaleEtc)
		}
		return dir, nil
	}
	tmp, err := prepareEtc(base, ts)
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

// etcFingerprint hashes what prepareEtc would copy and write: for each
// entry, its path, mode, size, inode, modification and change times (a
// replaced file has a new inode or change time, so contents need not be
// read); a link, by its name (see appendTree). It runs at every start, over several hundred
// entries, so it appends to one buffer rather than formatting each.
func etcFingerprint(ts trustSource) (string, error) {
	buf := append(make([]byte, 0, 64<<10), etcFormat+"\n"...)
	var err error
	for _, n := range etcNames() {
		if buf, err = appendTree(buf, "/etc/"+n); err != nil {
			return "", err
		}
	}
	if buf, err = appendTrust(buf, ts); err != nil {
		return "", err
	}
	keys := make([]string, 0, len(etcSynthesized))
	for k := range etcSynthesized {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		buf = fmt.Appendf(buf, "synth %s %q\n", k, etcSynthesized[k])
	}
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:]), nil
}

// appendTree appends the entry p, and below it when it is a directory, in
// name order; an entry that does not exist is left out.
func appendTree(buf []byte, p string) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return buf, nil
		}
		return buf, &fs.PathError{Op: "lstat", Path: p, Err: err}
	}
	buf = append(buf, p...)
	for _, v := range []int64{int64(st.Mode), st.Size, int64(st.Ino), st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec} {
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, v, 10)
	}
	buf = append(buf, '\n')
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return buf, nil
	}
	entries, err := os.ReadDir(p) // in name order
	if err != nil {
		return buf, err
	}
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink != 0 {
			// A link cannot change in place: a new target is a new link,
			// which changes the directory's times, hashed above. So links
			// are hashed by name only, without a stat each (most of
			// /etc/alternatives).
			buf = append(append(append(buf, p...), '/'), e.Name()...)
			buf = append(buf, " link\n"...)
			continue
		}
		if buf, err = appendTree(buf, p+"/"+e.Name()); err != nil {
			return buf, err
		}
	}
	return buf, nil
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
