package deps

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
)

// DefaultMaxBytes is a store's default size cap.
const DefaultMaxBytes = 5 << 30

// DefaultMaxEntries is the default cap on the files, directories and links
// of one environment. The sandboxes of an install bound it too, apart
// (a run may add 20,000 names to its workspace, and pip and npm run
// once each), and backends may differ: the store keeps its own.
const DefaultMaxEntries = 50_000

// Store keeps environments under Dir, one directory each, named by its
// key:
//
//	KEY/env.json   what was asked and installed (Env), written by codeagent
//	KEY/ws/        the install's workspace, which its sandbox wrote
//	KEY/ws/site/   the Python packages, bound read-only into executions
//	KEY/ws/js/     the npm packages (node_modules), likewise
//	KEY.lock       taken exclusively to install or remove KEY, shared by
//	               each execution that uses it (flock)
//	.staging-*     installs under way, or left by a crash (swept)
//
// An install runs in Sandbox in a staging directory of its own, which
// becomes KEY in one rename once pip has succeeded: a failed or
// interrupted install leaves nothing that Ensure would use. Requests for
// one key, from this process or another, install once.
type Store struct {
	Dir string
	// Sandbox runs installs (with the egress layer: they reach the index).
	Sandbox sandbox.Sandbox
	// Platform names the interpreter and machine the environments are
	// for (a backend and its image): part of every key.
	Platform string
	// MaxBytes caps the environments' total size on disk (see
	// diskUsage); past it, the least recently used not in use are removed
	// after an install. 0 is DefaultMaxBytes.
	MaxBytes int64
	// MaxEntries caps the files, directories and links of one
	// environment: an install that makes more fails and leaves nothing.
	// 0 is DefaultMaxEntries.
	MaxEntries int64
	// Limits bound an install; zero fields take InstallLimits'.
	Limits sandbox.Limits
	Logger *slog.Logger
	// OnInstall, when set, is told of an install as it starts (a door
	// shows the wait).
	OnInstall func(Request)

	mu       sync.Mutex
	inflight map[string]*sync.Mutex
}

// Env is an installed environment.
type Env struct {
	Key      string    `json:"key"`
	Request  Request   `json:"request"`
	Packages []Package `json:"packages"`
	// Size is what the environment takes on disk (see diskUsage), and
	// Entries its files, directories and links.
	Size    int64     `json:"size"`
	Entries int64     `json:"entries"`
	Created time.Time `json:"created"`
	// Used is when an execution last took it (the directory's mtime).
	Used time.Time `json:"-"`
	// Dir is the environment's directory on the host.
	Dir string `json:"-"`
}

// Binds are the binds that show e to a program: the Python packages at
// PythonPath, the npm packages at JavaScriptPath.
func (e Env) Binds() []sandbox.Bind {
	var out []sandbox.Bind
	if len(e.Request.Python) > 0 {
		out = append(out, sandbox.Bind{Source: filepath.Join(e.Dir, "ws", "site"), Path: PythonPath})
	}
	if len(e.Request.JavaScript) > 0 {
		out = append(out, sandbox.Bind{Source: filepath.Join(e.Dir, "ws", "js"), Path: JavaScriptPath})
	}
	return out
}

// Apply makes spec's program see e: bound read-only, first on PYTHONPATH
// and NODE_PATH.
func (e Env) Apply(spec *sandbox.Spec) {
	spec.Binds = append(spec.Binds, e.Binds()...)
	env := make(map[string]string, len(spec.Env)+2)
	for k, v := range spec.Env {
		env[k] = v
	}
	prepend := func(k, dir string) {
		if p := env[k]; p != "" {
			env[k] = dir + ":" + p
		} else {
			env[k] = dir
		}
	}
	if len(e.Request.Python) > 0 {
		prepend("PYTHONPATH", PythonPath)
	}
	if len(e.Request.JavaScript) > 0 {
		prepend("NODE_PATH", NodePath)
	}
	spec.Env = env
}

// Lease is an environment in use: it is not removed until Release.
type Lease struct {
	Env
	// Installed says this call installed it (a cache miss).
	Installed bool
	lock      *os.File
}

// Release lets the environment be removed again.
func (l *Lease) Release() {
	if l != nil && l.lock != nil {
		l.lock.Close()
		l.lock = nil
	}
}

// Ensure returns the environment of req, installing it first when there
// is none, held until the lease's Release. A request that cannot be
// installed is an *InstallError (or wraps ErrInvalid).
func (s *Store) Ensure(ctx context.Context, req Request) (*Lease, error) {
	r, err := req.Normalize()
	if err != nil {
		return nil, err
	}
	key, err := r.Key(s.Platform)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("environments: %w", err)
	}
	// One install per key in this process; the file lock covers others.
	m := s.keyMutex(key)
	m.Lock()
	defer m.Unlock()
	env, lock, installed, err := s.acquire(ctx, r, key)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	_ = os.Chtimes(env.Dir, now, now)
	env.Used = now
	if installed {
		s.evict(key)
	}
	return &Lease{Env: env, Installed: installed, lock: lock}, nil
}

// load reads the environment key, or fs.ErrNotExist.
func (s *Store) load(key string) (Env, error) {
	dir := filepath.Join(s.Dir, key)
	b, err := os.ReadFile(filepath.Join(dir, "env.json"))
	if err != nil {
		return Env{}, err
	}
	var e Env
	if err := json.Unmarshal(b, &e); err != nil || e.Key != key {
		return Env{}, fmt.Errorf("environment %s: a damaged env.json (remove it with codeagent envs rm %s)", key, key)
	}
	e.Dir = dir
	if fi, err := os.Stat(dir); err == nil {
		e.Used = fi.ModTime()
	}
	if e.Entries == 0 {
		s.recount(&e)
	}
	return e, nil
}

// recount measures an environment recorded before sizes counted the disk
// (Size was its files' bytes, Entries absent) and records it, so that
// eviction weighs it as it weighs the others. The measure stops at the
// entry cap, as an install's does.
func (s *Store) recount(e *Env) {
	e.Size, e.Entries = diskUsage(filepath.Join(e.Dir, "ws"), s.maxEntries())
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return
	}
	// Written beside the sandbox's ws/, then renamed over: readers see the
	// old record or the new one.
	var b [6]byte
	_, _ = rand.Read(b[:])
	tmp := filepath.Join(e.Dir, ".env.json-"+hex.EncodeToString(b[:]))
	if os.WriteFile(tmp, append(data, '\n'), 0o644) == nil && os.Rename(tmp, filepath.Join(e.Dir, "env.json")) == nil {
		return
	}
	_ = os.Remove(tmp)
}

func (s *Store) maxEntries() int64 {
	if s.MaxEntries > 0 {
		return s.MaxEntries
	}
	return DefaultMaxEntries
}

// install installs r as key: in a staging directory, renamed into place
// once pip has succeeded; removed otherwise.
func (s *Store) install(ctx context.Context, r Request, key string) (Env, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	staging := filepath.Join(s.Dir, ".staging-"+key+"-"+hex.EncodeToString(b[:]))
	if err := os.Mkdir(staging, 0o755); err != nil {
		return Env{}, fmt.Errorf("environments: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(staging)
		}
	}()
	// The sandbox writes only below ws: what codeagent writes itself
	// (env.json) is beside it, where no link of the install's can be.
	ws := filepath.Join(staging, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		return Env{}, fmt.Errorf("environments: %w", err)
	}
	lim := InstallLimits().Overlay(s.Limits)
	start := time.Now()
	pkgs, err := install(ctx, s.Sandbox, r, ws, lim)
	if err != nil {
		return Env{}, err
	}
	for _, d := range []string{"site", "js"} {
		if d == "js" && len(r.JavaScript) == 0 {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(ws, d)); err != nil || !fi.IsDir() {
			// Nothing installed, or something in the way: an empty one.
			if err := os.RemoveAll(filepath.Join(ws, d)); err != nil {
				return Env{}, fmt.Errorf("environments: %w", err)
			}
			if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil {
				return Env{}, fmt.Errorf("environments: %w", err)
			}
		}
	}
	_ = os.Remove(filepath.Join(ws, "report.json"))
	if err := os.RemoveAll(filepath.Join(ws, installTmp)); err != nil { // links are removed, not followed
		return Env{}, fmt.Errorf("environments: %w", err)
	}
	size, entries := diskUsage(ws, s.maxEntries())
	if most := s.maxEntries(); entries > most {
		return Env{}, &InstallError{Message: fmt.Sprintf("the packages make more than %d files and directories, the limit of one environment; ask for fewer packages", most)}
	}
	env := Env{Key: key, Request: r, Packages: pkgs, Size: size, Entries: entries, Created: time.Now().UTC().Truncate(time.Second)}
	data, err := json.MarshalIndent(env, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(staging, "env.json"), append(data, '\n'), 0o644) // staging is ours alone
	}
	if err == nil {
		err = unix.Renameat2(unix.AT_FDCWD, staging, unix.AT_FDCWD, filepath.Join(s.Dir, key), unix.RENAME_NOREPLACE)
	}
	if err != nil {
		return Env{}, fmt.Errorf("environments: %w", err)
	}
	done = true
	env.Dir = filepath.Join(s.Dir, key)
	if s.Logger != nil {
		s.Logger.Info("installed dependencies", "env", key, "packages", len(pkgs), "bytes", env.Size, "entries", env.Entries, "took", time.Since(start).Round(time.Millisecond))
	}
	return env, nil
}

// inodeCost is what each file, directory and link counts for besides
// its blocks: its inode (256 bytes on ext4, 512 on XFS) and its directory
// entry. An empty file or directory takes no data block on some file
// systems and an inode on all; inodes run out apart from bytes.
const inodeCost = 512

// diskUsage is what the tree below dir takes on disk: the blocks
// allocated to each file, directory and link (st_blocks, as du counts
// them; a file linked twice counts once), plus inodeCost for each, and
// how many there are, dir included. Links are not followed. It stops
// counting past maxEntries entries: entries is then maxEntries+1.
func diskUsage(dir string, maxEntries int64) (size, entries int64) {
	seen := map[[2]uint64]bool{}
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: what can be counted is
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		entries++
		size += inodeCost
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if !fi.IsDir() && st.Nlink > 1 {
				id := [2]uint64{uint64(st.Dev), st.Ino}
				if seen[id] {
					return nil
				}
				seen[id] = true
			}
			size += st.Blocks * 512
		} else {
			size += fi.Size()
		}
		if entries > maxEntries {
			return fs.SkipAll
		}
		return nil
	})
	return size, entries
}

// List returns the environments, the most recently used first.
func (s *Store) List() ([]Env, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Env
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if env, err := s.load(e.Name()); err == nil {
			out = append(out, env)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Used.After(out[j].Used) })
	return out, nil
}

// ErrInUse is returned by Remove for an environment an execution holds.
var ErrInUse = errors.New("the environment is in use")

// Remove removes the environment key (a prefix of at least 6 characters
// names it too) unless it is in use.
func (s *Store) Remove(key string) error {
	key, err := s.resolve(key)
	if err != nil {
		return err
	}
	lock, err := s.tryLock(key, unix.LOCK_EX)
	if err != nil {
		return err
	}
	defer lock.Close()
	return s.removeLocked(key)
}

// removeLocked removes key, whose lock is held: first out of its name, so
// that no one finds it half removed.
func (s *Store) removeLocked(key string) error {
	dir := filepath.Join(s.Dir, key)
	var b [6]byte
	_, _ = rand.Read(b[:])
	gone := filepath.Join(s.Dir, ".staging-removed-"+hex.EncodeToString(b[:]))
	if err := os.Rename(dir, gone); err != nil {
		return fmt.Errorf("remove environment %s: %w", key, err)
	}
	return os.RemoveAll(gone)
}

// resolve finds the key that key names, whole or by a unique prefix.
func (s *Store) resolve(key string) (string, error) {
	if len(key) < 6 || strings.ContainsAny(key, "/.") {
		return "", fmt.Errorf("%w: environment %q: give its key (at least 6 characters)", ErrInvalid, key)
	}
	envs, err := s.List()
	if err != nil {
		return "", err
	}
	var found []string
	for _, e := range envs {
		if strings.HasPrefix(e.Key, key) {
			found = append(found, e.Key)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w: no environment %s", fs.ErrNotExist, key)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%w: %s names %d environments", ErrInvalid, key, len(found))
}

// Prune removes the least recently used environments not in use until
// the rest take at most maxBytes (0 removes every one not in use), and
// the leftovers of crashed installs. It returns what it removed.
func (s *Store) Prune(maxBytes int64) ([]Env, error) {
	envs, err := s.List()
	if err != nil {
		return nil, err
	}
	s.sweep()
	var total int64
	for _, e := range envs {
		total += e.Size
	}
	var removed []Env
	for i := len(envs) - 1; i >= 0 && total > maxBytes; i-- {
		e := envs[i]
		lock, err := s.tryLock(e.Key, unix.LOCK_EX)
		if err != nil {
			continue // in use
		}
		if s.removeLocked(e.Key) == nil {
			total -= e.Size
			removed = append(removed, e)
		}
		lock.Close()
	}
	return removed, nil
}

// evict keeps the store within MaxBytes after an install, sparing keep.
func (s *Store) evict(keep string) {
	most := s.MaxBytes
	if most <= 0 {
		most = DefaultMaxBytes
	}
	envs, err := s.List()
	if err != nil {
		return
	}
	var total int64
	for _, e := range envs {
		total += e.Size
	}
	for i := len(envs) - 1; i >= 0 && total > most; i-- {
		e := envs[i]
		if e.Key == keep {
			continue
		}
		lock, err := s.tryLock(e.Key, unix.LOCK_EX)
		if err != nil {
			continue // in use
		}
		if s.removeLocked(e.Key) == nil {
			total -= e.Size
			if s.Logger != nil {
				s.Logger.Info("removed the least recently used environment", "env", e.Key, "bytes", e.Size)
			}
		}
		lock.Close()
	}
}

// sweep removes staging directories no install holds: those of crashed
// installs (an install under way holds its key's lock).
func (s *Store) sweep() {
	ents, _ := os.ReadDir(s.Dir)
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, ".staging-") {
			continue
		}
		if rest, ok := strings.CutPrefix(name, ".staging-"); ok && len(rest) > 13 && !strings.HasPrefix(rest, "removed-") {
			key := rest[:len(rest)-13]
			lock, err := s.tryLock(key, unix.LOCK_EX)
			if err != nil {
				continue
			}
			_ = os.RemoveAll(filepath.Join(s.Dir, name))
			lock.Close()
			continue
		}
		_ = os.RemoveAll(filepath.Join(s.Dir, name))
	}
}
