// Package proctest lists the host's processes from /proc, for tests that
// look for what a sandbox or a killed server left behind.
package proctest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Process is one process as /proc/PID/status describes it.
type Process struct {
	PID, PPID, UID int    // UID is the real uid, on the host
	Name, State    string // State as "S (sleeping)"
	NSpid          string // its pids in its PID namespaces, outermost first
}

// Ended reports whether the process has ended and waits only for its
// parent to reap it (a zombie).
func (p Process) Ended() bool {
	return strings.HasPrefix(p.State, "Z") || strings.HasPrefix(p.State, "X")
}

func (p Process) String() string {
	wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", p.PID))
	return fmt.Sprintf("%d %s (parent %d, %s, pids in its namespaces: %s, waits in %s)", p.PID, p.Name, p.PPID, p.State, p.NSpid, wchan)
}

// Live lists the processes that have not ended and whose real uid is in
// [start, start+count).
func Live(start, count int) []Process {
	files, _ := filepath.Glob("/proc/[0-9]*/status")
	var out []Process
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // ended meanwhile
		}
		p := Process{UID: -1}
		p.PID, _ = strconv.Atoi(filepath.Base(filepath.Dir(f)))
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimSpace(v)
			switch k {
			case "Name":
				p.Name = v
			case "State":
				p.State = v
			case "PPid":
				p.PPID, _ = strconv.Atoi(v)
			case "NSpid":
				p.NSpid = strings.Join(strings.Fields(v), " ")
			case "Uid":
				if f := strings.Fields(v); len(f) > 0 {
					p.UID, _ = strconv.Atoi(f[0])
				}
			}
		}
		if p.UID >= start && p.UID < start+count && !p.Ended() {
			out = append(out, p)
		}
	}
	return out
}
