package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/app"
)

// serveLockName is the file of the data directory that one serve holds
// locked while it runs (the kernel drops the lock when the process ends,
// kill -9 included), with the address it listens on.
const serveLockName = "serve.lock"

// serveLock is a data directory held by this serve.
type serveLock struct{ f *os.File }

// lockServe takes dataDir for this serve, or refuses (class Busy: exit
// 75) naming the address of the serve that holds it: two servers on one
// data directory would replace each other's token file and sweep each
// other's state.
func lockServe(dataDir string) (*serveLock, error) {
	path := filepath.Join(dataDir, serveLockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the data directory: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b := make([]byte, 512)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		held := strings.TrimSpace(string(b[:n]))
		if held == "" {
			held = "an address it has not written yet"
		}
		return nil, app.Errorf(app.Busy, "another codeagent serve uses the data directory %s (%s): stop it, or give this one another --data-dir", dataDir, held)
	}
	return &serveLock{f: f}, nil
}

// note records what this serve is, for a second one to name.
func (l *serveLock) note(format string, a ...any) {
	_ = l.f.Truncate(0)
	_, _ = l.f.WriteAt([]byte(fmt.Sprintf(format, a...)+"\n"), 0)
}

// release ends the hold; the file stays (another serve may hold it by now).
func (l *serveLock) release() {
	_ = l.f.Truncate(0)
	l.f.Close()
}
