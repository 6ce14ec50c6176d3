// Package hostids hands out host user ids from codeagent's own range, one
// per concurrent sandbox, so that per-user kernel quotas (pipe buffers,
// inotify instances and watches, message queues, user namespaces) are
// charged to each sandbox alone: one program using up its uid's quota
// leaves every other sandbox its own.
//
// An id is held through a lock (flock) on a file named after it in a
// root-owned directory, so that several codeagent processes on one host
// never hand out the same id at once, and the ids of a process that died
// are free again as soon as it is gone. Ids released by a process stay
// locked by it for a while and are handed out again first (last in, first
// out), which keeps the set of ids in use small and saves the lock's
// system calls.
package hostids

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Pool hands out ids of [Start, Start+Count). It is safe for concurrent use.
type Pool struct {
	start, count int
	dir          string

	mu     sync.Mutex
	held   map[int]*os.File // ids this process holds the lock of, in use or free
	used   map[int]bool     // held ids handed out and not released
	free   []int            // held ids not in use, the last released last
	cursor int              // where the search for an id not held goes on
}

// Dir is where codeagent run as root keeps the locks of its host ids,
// shared by every backend and process.
const Dir = "/run/codeagent/uids"

// maxFree bounds the ids kept locked while not in use.
const maxFree = 256

var (
	poolsMu sync.Mutex
	pools   = map[string]*Pool{}
)

// Open returns the process's pool of the ids [start, start+count) whose
// locks live in dir (made 0700 if missing; it must be root's or the
// caller's, reached without links). Backends of one process share it.
func Open(dir string, start, count int) (*Pool, error) {
	if start <= 0 || count <= 0 || start+count > 1<<32-1 {
		return nil, fmt.Errorf("host id range %d+%d is out of range", start, count)
	}
	key := fmt.Sprintf("%s\x00%d\x00%d", dir, start, count)
	poolsMu.Lock()
	defer poolsMu.Unlock()
	if p := pools[key]; p != nil {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("host id locks: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return nil, fmt.Errorf("host id locks: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("host id locks: %s is not a directory of uid %d closed to others", dir, os.Geteuid())
	}
	p := &Pool{start: start, count: count, dir: dir, held: map[int]*os.File{}, used: map[int]bool{}}
	p.cursor = int(uint(os.Getpid()*7919) % uint(count)) // processes start their search apart
	pools[key] = p
	return p, nil
}

// Range returns the pool's first id and how many it has.
func (p *Pool) Range() (start, count int) { return p.start, p.count }

// ErrExhausted is returned when every id of the range is in use.
var ErrExhausted = errors.New("every host uid of codeagent's range is in use")

// Acquire returns an id that no other sandbox of this host uses until it
// is given back with Release.
func (p *Pool) Acquire() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		id := p.free[n-1]
		p.free = p.free[:n-1]
		p.used[id] = true
		return id, nil
	}
	for range p.count {
		id := p.start + p.cursor
		p.cursor = (p.cursor + 1) % p.count
		if _, mine := p.held[id]; mine {
			continue
		}
		f, err := p.lock(id)
		if err != nil {
			if errors.Is(err, unix.EWOULDBLOCK) {
				continue
			}
			return 0, err
		}
		p.held[id] = f
		p.used[id] = true
		return id, nil
	}
	return 0, ErrExhausted
}

// lock takes the lock of id, without waiting.
func (p *Pool) lock(id int) (*os.File, error) {
	name := filepath.Join(p.dir, strconv.Itoa(id))
	fd, err := unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("host id lock %s: %w", name, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// Release gives id back once nothing of its sandbox is left: no process
// and nothing it could still hold. An id whose sandbox may not be gone
// must not be released (it is then held until the process ends).
func (p *Pool) Release(id int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.held[id]
	if !ok || !p.used[id] {
		return
	}
	delete(p.used, id)
	if len(p.free) < maxFree {
		p.free = append(p.free, id)
		return
	}
	delete(p.held, id)
	_ = f.Close() // the lock goes with the descriptor
}

// InUse reports how many ids this process holds for sandboxes now.
func (p *Pool) InUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.used)
}
