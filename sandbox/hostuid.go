package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// DefaultHostUID is the host user and group id that sandboxed programs run
// as when codeagent itself runs as root: an id of codeagent's own, far
// above the ranges distributions give to accounts (1000-60000) and to
// subordinate ids (100000 up, 65536 per user), so that a file a program
// leaves behind, a process it starts, or a per-user kernel quota it uses
// belongs to nobody real. Backends take it from their Config.
const DefaultHostUID = 2_000_000_000

// CheckHostUID returns an error when uid is used by an account or group of
// this host, or lies in a subordinate id range of /etc/subuid or
// /etc/subgid: programs would then act as, or beside, a real user.
func CheckHostUID(uid int) error {
	if uid <= 0 || uid >= 1<<32-1 {
		return fmt.Errorf("host uid %d is out of range", uid)
	}
	for _, f := range []string{"/etc/passwd", "/etc/group"} {
		if name, ok := idInDatabase(f, uid); ok {
			return fmt.Errorf("host uid %d is used by %q in %s; choose an id no account uses", uid, name, f)
		}
	}
	for _, f := range []string{"/etc/subuid", "/etc/subgid"} {
		if name, ok := idInRanges(f, uid); ok {
			return fmt.Errorf("host uid %d lies in the subordinate range of %q in %s; choose another", uid, name, f)
		}
	}
	return nil
}

// idInDatabase reports whether a passwd or group file has an entry whose
// third field is id.
func idInDatabase(file string, id int) (string, bool) {
	f, err := os.Open(file)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) > 2 {
			if n, err := strconv.Atoi(fields[2]); err == nil && n == id {
				return fields[0], true
			}
		}
	}
	return "", false
}

// idInRanges reports whether a subuid or subgid file has a range holding id.
func idInRanges(file string, id int) (string, bool) {
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
		start, err1 := strconv.Atoi(fields[1])
		count, err2 := strconv.Atoi(fields[2])
		if err1 == nil && err2 == nil && id >= start && id < start+count {
			return fields[0], true
		}
	}
	return "", false
}
