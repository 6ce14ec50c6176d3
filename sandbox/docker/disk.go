package docker

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/backendkit"
	"github.com/codeagent/codeagent/sandbox/internal/diskwatch"
)

// The disk limit in this backend, in three layers:
//
//   - the staging file system (where it can be made: root, loop devices,
//     mke2fs): the file system refuses what goes past Disk plus half a
//     FileSize, whatever the program creates;
//   - the disk watcher on the staging directory: kills the program as soon
//     as it charges more than Disk (see package diskwatch), which gives the
//     verdict, and is the bound where staging directories are plain;
//   - the copy back: brings back at most Disk of growth, holes kept, and
//     says in the result what it left behind.

// useStagingFS turns staging file systems on when they can be made.
func (b *Backend) useStagingFS() {
	if b.cfg.PlainStaging || !Local(b.cfg.Host) {
		return
	}
	if err := stagingUsable(); err != nil {
		b.log.Info("docker: staging in plain directories; the disk limit rests on the watcher", "reason", err)
		return
	}
	b.staging.Store(true)
}

// mountStaging gives bx a staging file system for its class, when they are
// on; its staging directory is then on it.
func (b *Backend) mountStaging(bx *box) error {
	if !b.staging.Load() {
		return nil
	}
	sfs, err := mountStaging(bx.dir, bx.class.Disk)
	if err != nil {
		b.staging.Store(false)
		b.log.Warn("docker: cannot make a staging file system; staging in plain directories from now on", "err", err)
		unmountBelow(bx.dir)
		return nil
	}
	bx.sfs, bx.ws = sfs, filepath.Join(sfs.dir, "ws")
	return nil
}

// makeRoom gives the whole staging file system to the workspace about to
// be staged into it, unless that is empty: the reserve made with it leaves
// only the disk limit and some free.
func makeRoom(bx *box, ws string) error {
	if bx.sfs == nil {
		return nil
	}
	f, err := os.Open(ws)
	if err != nil {
		return err
	}
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) == 0 {
		return nil
	}
	return bx.sfs.release()
}

// diskLimits bounds the run on bx once the workspace is staged: on a
// staging file system the program gets Disk plus half a FileSize of free
// space, and no more new entries than the file system has inodes.
func diskLimits(bx *box, lim sandbox.Limits) (diskwatch.Limits, error) {
	dl := diskwatch.Limits{Bytes: lim.Disk}
	if bx.sfs == nil {
		return dl, nil
	}
	inodes, err := bx.sfs.fit(lim.Disk + lim.FileSize/2)
	if err != nil {
		return dl, err
	}
	if inodes-16 < diskwatch.MaxEntries {
		dl.Entries = max(inodes-16, 1)
	}
	return dl, nil
}

// watchDisk starts the disk watcher on the staging directory; the
// returned stop ends it and makes the verdict the disk limit's when the
// staging directory went past it at any time, even if the program ended
// by itself (at ENOSPC, say).
func (e *execution) watchDisk(dl diskwatch.Limits) (stop func(), err error) {
	w, err := diskwatch.Start(e.bx.ws, dl, func() { e.kill(backendkit.KilledDisk) })
	if err != nil {
		return nil, fmt.Errorf("watch the staging directory: %w", err)
	}
	return func() {
		if w.Stop() {
			e.mu.Lock()
			if e.reason == backendkit.NotKilled {
				e.reason = backendkit.KilledDisk
			}
			e.mu.Unlock()
		}
	}, nil
}
