//go:build !linux

package docker

// seccompOpt: moby's profile package builds on Linux only; elsewhere the
// engine's built-in default applies unchanged.
func seccompOpt() (string, error) { return "", nil }
