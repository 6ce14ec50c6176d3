//go:build !linux

package docker

import "errors"

// stagingFS is Linux-only (loop devices); elsewhere staging directories
// are plain directories, bounded by the disk watcher and the copy back.
type stagingFS struct{ dir string }

func stagingUsable() error { return errors.New("staging file systems need Linux") }

func mountStaging(string, int64) (*stagingFS, error) { return nil, stagingUsable() }

func (s *stagingFS) unmount()               {}
func (s *stagingFS) fit(int64) (int, error) { return 0, nil }
func (s *stagingFS) release() error         { return nil }
func (s *stagingFS) visibleIn(int) bool     { return false }
func unmountBelow(string)                   {}
