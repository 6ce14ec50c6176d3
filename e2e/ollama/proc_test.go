package ollama

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is what /proc says about one process.
type proc struct {
	pid, ppid, pgid int
	state           string
	cmdline         string
}

// procs lists the live processes (zombies left out: they hold nothing).
func procs() []proc {
	entries, _ := os.ReadDir("/proc")
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgid, _ := strconv.Atoi(f[2])
		cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, proc{pid: pid, ppid: ppid, pgid: pgid, state: f[0], cmdline: strings.TrimSpace(strings.ReplaceAll(string(cl), "\x00", " "))})
	}
	return out
}

// suiteProcesses describes the live processes that belong to the suite:
// in Ollama's process group, or naming the suite's directory in their
// command line or environment (runners, codeagent and its children).
func suiteProcesses() []string {
	self := os.Getpid()
	group := 0
	if suite.serve != nil && suite.serve.Process != nil {
		group = suite.serve.Process.Pid
	}
	var left []string
	for _, p := range procs() {
		if p.pid == self || (suite.watchdog != nil && suite.watchdog.Process != nil && p.pid == suite.watchdog.Process.Pid) {
			continue
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid))
		if (group != 0 && p.pgid == group) || strings.Contains(p.cmdline, suite.root) || strings.Contains(string(env), suite.root) {
			left = append(left, fmt.Sprintf("pid %d (%s): %s", p.pid, p.state, p.cmdline))
		}
	}
	return left
}

// runners returns the pids of Ollama's runner processes serving the model
// file blob (see blobPath).
func runners(blob string) []int {
	var pids []int
	for _, p := range procs() {
		if p.ppid == suite.serve.Process.Pid && strings.Contains(p.cmdline, " runner ") && strings.Contains(p.cmdline, blob) {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// age is how long process pid has run, from its start time (in the
// kernel's USER_HZ ticks, 100 a second) and the system's uptime.
func age(pid int) (time.Duration, bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	up, err := os.ReadFile("/proc/uptime")
	if len(f) < 20 || err != nil {
		return 0, false
	}
	start, err1 := strconv.ParseInt(f[19], 10, 64)
	now, err2 := strconv.ParseFloat(strings.Fields(string(up))[0], 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(now*float64(time.Second)) - time.Duration(start)*time.Second/100, true
}

// killRunners kills (SIGKILL) the runners of blob and says how many.
func killRunners(blob string) int {
	n := 0
	for _, pid := range runners(blob) {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// checkLoopback reports any socket of Ollama's processes (serve and its
// runners) bound to, or connected to, an address other than loopback: it
// must listen only on 127.0.0.1 and talk to nothing outside this machine.
func checkLoopback() error {
	if suite.serve == nil {
		return nil
	}
	inodes := map[string]int{} // socket inode -> pid
	for _, p := range procs() {
		if p.pgid != suite.serve.Process.Pid {
			continue
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid))
		for _, fd := range fds {
			l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.pid, fd.Name()))
			if err == nil && strings.HasPrefix(l, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = p.pid
			}
		}
	}
	var bad []string
	seen := 0
	for _, table := range []string{"tcp", "tcp6", "udp", "udp6"} {
		f, err := os.Open("/proc/net/" + table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fl := strings.Fields(sc.Text())
			if len(fl) < 10 {
				continue
			}
			pid, ours := inodes[fl[9]]
			if !ours {
				continue
			}
			seen++
			local, remote := hexAddr(fl[1]), hexAddr(fl[2])
			if local == nil || !local.IsLoopback() || remote == nil || !(remote.IsLoopback() || remote.IsUnspecified()) {
				bad = append(bad, fmt.Sprintf("%s socket of pid %d: %s -> %s", table, pid, fl[1], fl[2]))
			}
		}
		f.Close()
	}
	if seen == 0 {
		return fmt.Errorf("found no socket of Ollama's processes to check (is /proc readable?)")
	}
	if len(bad) > 0 {
		return fmt.Errorf("Ollama used addresses beyond loopback: %s", strings.Join(bad, "; "))
	}
	return nil
}

// hexAddr decodes an address of /proc/net/tcp ("0100007F:2AF8"): the IP in
// 32-bit words of host (little-endian) byte order, then the port.
func hexAddr(s string) net.IP {
	h, _, ok := strings.Cut(s, ":")
	if !ok {
		return nil
	}
	b, err := hex.DecodeString(h)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return nil
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return net.IP(b)
}
