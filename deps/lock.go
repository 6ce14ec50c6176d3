package deps

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// An environment's key lock: shared while executions use it, exclusive
// while it is installed or removed, across processes (flock on
// DIR/KEY.lock) and, within one, a mutex per key.

// acquire returns key's environment held shared, installing it under
// the exclusive lock when it is missing. The exclusive lock is only ever
// tried, never waited for: whoever holds it may be installing, only
// looking, or (having installed) using the environment shared for as
// long as its execution lasts, so a waiter looks again instead. Waiting
// for it made two processes that both saw the key missing wait forever
// for each other's lease.
func (s *Store) acquire(ctx context.Context, r Request, key string) (Env, *os.File, bool, error) {
	for {
		// Most often it is there: shared, as the executions that use it.
		lock, err := s.lockKey(ctx, key, unix.LOCK_SH)
		if err != nil {
			return Env{}, nil, false, err
		}
		env, err := s.load(key)
		if err == nil {
			return env, lock, false, nil
		}
		lock.Close()
		if !errors.Is(err, fs.ErrNotExist) {
			return Env{}, nil, false, err
		}
		lock, err = s.tryLock(key, unix.LOCK_EX)
		if errors.Is(err, ErrInUse) {
			if err := pause(ctx); err != nil {
				return Env{}, nil, false, err
			}
			continue
		}
		if err != nil {
			return Env{}, nil, false, err
		}
		// Another process may have installed it meanwhile.
		installed := false
		env, err = s.load(key)
		if errors.Is(err, fs.ErrNotExist) {
			if s.OnInstall != nil {
				s.OnInstall(r)
			}
			env, err = s.install(ctx, r, key)
			installed = err == nil
		}
		if err == nil {
			// Shared from now on: others may use it, no one remove it.
			err = unix.Flock(int(lock.Fd()), unix.LOCK_SH)
		}
		if err != nil {
			lock.Close()
			return Env{}, nil, false, err
		}
		return env, lock, installed, nil
	}
}

// pause waits a little before a lock is tried again (jittered, so two
// processes polling do not stay in step), or until ctx ends.
func pause(ctx context.Context) error {
	var b [1]byte
	_, _ = rand.Read(b[:])
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(30+int(b[0])%40) * time.Millisecond):
		return nil
	}
}

func (s *Store) keyMutex(key string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight == nil {
		s.inflight = map[string]*sync.Mutex{}
	}
	m := s.inflight[key]
	if m == nil {
		m = &sync.Mutex{}
		s.inflight[key] = m
	}
	return m
}

// lockKey takes key's lock file in mode (LOCK_EX or LOCK_SH), waiting
// until ctx ends.
func (s *Store) lockKey(ctx context.Context, key string, mode int) (*os.File, error) {
	for {
		f, err := s.tryLock(key, mode)
		if !errors.Is(err, ErrInUse) {
			return f, err
		}
		if err := pause(ctx); err != nil {
			return nil, err
		}
	}
}

// tryLock takes key's lock file in mode now, or returns ErrInUse. Lock
// files stay: removing one could give two holders their own.
func (s *Store) tryLock(key string, mode int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(s.Dir, key+".lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("environments: %w", err)
	}
	err = unix.Flock(int(f.Fd()), mode|unix.LOCK_NB)
	if err == nil {
		return f, nil
	}
	f.Close()
	if errors.Is(err, unix.EWOULDBLOCK) {
		return nil, fmt.Errorf("%w: %s", ErrInUse, key)
	}
	return nil, fmt.Errorf("environments: lock %s: %w", key, err)
}
