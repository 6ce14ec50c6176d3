package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"

	"github.com/codeagent/codeagent/store"
)

// dataDirFlag registers --data-dir: where sessions and the store live.
func dataDirFlag(fs *flag.FlagSet) *string {
	return fs.String("data-dir", "", "data directory (default $XDG_DATA_HOME/codeagent or ~/.local/share/codeagent)")
}

// resolveDataDir applies the default to the --data-dir value.
func resolveDataDir(dir string, getenv func(string) string) (string, error) {
	if dir != "" {
		return filepath.Abs(dir)
	}
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "codeagent"), nil
	}
	home := getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", usagef("no data directory: set --data-dir or HOME")
		}
		home = h
	}
	return filepath.Join(home, ".local", "share", "codeagent"), nil
}

// openStore opens the store of a data directory.
func openStore(ctx context.Context, dir string) (*store.Store, error) {
	return store.Open(ctx, filepath.Join(dir, "codeagent.db"))
}

// openDataStore resolves --data-dir and opens its store.
func openDataStore(ctx context.Context, dataDir string) (*store.Store, string, error) {
	dir, err := resolveDataDir(dataDir, os.Getenv)
	if err != nil {
		return nil, "", err
	}
	st, err := openStore(ctx, dir)
	return st, dir, err
}

var sessionName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// checkSessionName refuses names that could not be a directory of their own.
func checkSessionName(name string) error {
	if !sessionName.MatchString(name) {
		return usagef("invalid session name %q: use letters, digits, '.', '_' and '-' (at most 64)", name)
	}
	return nil
}

// sessionWorkspace is the workspace directory of a session.
func sessionWorkspace(dataDir, name string) string {
	return filepath.Join(dataDir, "sessions", name, "workspace")
}
