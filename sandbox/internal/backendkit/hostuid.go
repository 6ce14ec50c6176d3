package backendkit

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// DefaultHostUID is the first of the host user and group ids that
// sandboxed programs run as when codeagent itself runs as root, one id per
// concurrent sandbox out of HostUIDCount: ids of codeagent's own, far above
// the ranges distributions give to accounts (1000-60000) and to
// subordinate ids (100000 up, 65536 per user), so that a process a program
// starts, or a per-user kernel quota it uses, belongs to nobody real and to
// no other sandbox. Backends take the start from their Config.
const DefaultHostUID = 2_000_000_000

// HostUIDCount is how many host ids codeagent's range holds: the size of a
// subordinate id range.
const HostUIDCount = 65536

// CheckHostUIDRange returns an error when an id of [start, start+count) is
// used by an account or group of this host, or overlaps a subordinate id
// range of /etc/subuid or /etc/subgid.
func CheckHostUIDRange(start, count int) error {
	if start <= 0 || count <= 0 || start+count >= 1<<32-1 {
		return fmt.Errorf("host uid range %d-%d is out of range", start, start+count-1)
	}
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		if name, id, ok := idRangeInDatabase(f, start, count); ok {
			return fmt.Errorf("host uid range %d-%d holds id %d of %q in %s; choose a range no account uses", start, start+count-1, id, name, f)
		}
	}
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		if name, ok := rangeOverlaps(f, start, count); ok {
			return fmt.Errorf("host uid range %d-%d overlaps the subordinate range of %q in %s; choose another", start, start+count-1, name, f)
		}
	}
	return nil
}

// idRangeInDatabase reports an entry of a passwd or group file whose
// third field lies in [start, start+count).
func idRangeInDatabase(file string, start, count int) (string, int, bool) {
	f, err := os.Open(file)
	if err != nil {
		return "", 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) > 2 {
			if n, err := strconv.Atoi(fields[2]); err == nil && n >= start && n < start+count {
				return fields[0], n, true
			}
		}
	}
	return "", 0, false
}

// rangeOverlaps reports whether a subuid or subgid file has a range that
// overlaps [start, start+count).
func rangeOverlaps(file string, start, count int) (string, bool) {
	f, err := os.Open(file)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) != 3 {
			continue
		}
		s, err1 := strconv.Atoi(fields[1])
		n, err2 := strconv.Atoi(fields[2])
		if err1 == nil && err2 == nil && s < start+count && start < s+n {
			return fields[0], true
		}
	}
	return "", false
}

// CheckHostUID returns an error when uid is used by an account or group of
// this host, or lies in a subordinate id range of /etc/subuid or
// /etc/subgid: programs would then act as, or beside, a real user.
func CheckHostUID(uid int) error {
	if uid <= 0 || uid >= 1<<32-1 {
		return fmt.Errorf("host uid %d is out of range", uid)
	}
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		if name, _, ok := idRangeInDatabase(f, uid, 1); ok {
			return fmt.Errorf("host uid %d is used by %q in %s; choose an id no account uses", uid, name, f)
		}
	}
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		if name, ok := rangeOverlaps(f, uid, 1); ok {
			return fmt.Errorf("host uid %d lies in the subordinate range of %q in %s; choose another", uid, name, f)
		}
	}
	return nil
}
