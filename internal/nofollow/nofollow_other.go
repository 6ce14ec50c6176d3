//go:build !linux

package nofollow

import "errors"

var errUnsupported = errors.New("opening without following links needs Linux")

// Open is not available off Linux.
func Open(int, string, How) (int, error) { return -1, errUnsupported }

// Walk is not available off Linux.
func Walk(int, string, How) (int, error) { return -1, errUnsupported }

// MountOf is not available off Linux.
func MountOf(int) (MountID, error) { return MountID{}, errUnsupported }
