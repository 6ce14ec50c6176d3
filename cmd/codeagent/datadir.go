package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/store"
	"github.com/codeagent/codeagent/workspace"
)

// dataDirFlag registers --data-dir: where sessions and the store live.
func dataDirFlag(fs *flag.FlagSet) *string {
	return fs.String("data-dir", "", "data directory (default $XDG_DATA_HOME/codeagent or ~/.local/share/codeagent)")
}

// resolveDataDir applies the default to the --data-dir value and returns
// the directory's link-free path, created 0700 if missing. A symbolic link
// in its path that a program could have made is refused: the store and the
// sessions' workspaces would land wherever it points. The directory holds
// every session's tasks and outputs, so one open to other users is made
// 0700 when it is codeagent's own (a note on stderr says so) and refused
// otherwise (store.SecureDir).
func resolveDataDir(dir string, getenv func(string) string) (string, error) {
	if dir == "" {
		if x := getenv("XDG_DATA_HOME"); x != "" {
			dir = filepath.Join(x, "codeagent")
		} else {
			home := getenv("HOME")
			if home == "" {
				h, err := os.UserHomeDir()
				if err != nil {
					return "", usagef("no data directory: set --data-dir or HOME")
				}
				home = h
			}
			dir = filepath.Join(home, ".local", "share", "codeagent")
		}
	}
	resolved, err := workspace.MkdirAll(dir, 0o700)
	if err != nil {
		return "", usagef("data directory %s: %w", dir, err)
	}
	was, err := store.SecureDir(resolved, dbName)
	var open *store.DirOpenError
	if errors.As(err, &open) {
		return "", usagef("data directory %v with --data-dir", err)
	}
	if err != nil {
		return "", usagef("data directory: %w", err)
	}
	if was != 0 {
		fmt.Fprintf(os.Stderr, "codeagent: data directory %s was open to other users (mode %04o): made it 0700\n", resolved, was)
	}
	return resolved, nil
}

// dbName is the store's file in the data directory.
const dbName = "codeagent.db"

// openStore opens the store of a data directory.
func openStore(ctx context.Context, dir string) (*store.Store, error) {
	return store.Open(ctx, filepath.Join(dir, dbName))
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

var sessionName = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// checkSessionName refuses names that could not be a directory of their own.
func checkSessionName(name string) error {
	if !sessionName.MatchString(name) {
		return usagef("invalid session name %q: use letters, digits, '.', '_' and '-' (at most 64)", name)
	}
	return nil
}

// sessionWorkspace is the workspace directory of a session.
func sessionWorkspace(dataDir, name string) string {
	return filepath.Join(dataDir, sessionWorkspaceRel(name))
}

// sessionWorkspaceRel is a session's workspace relative to the data
// directory.
func sessionWorkspaceRel(name string) string { return "sessions/" + name + "/workspace" }

// openSessionWorkspace creates or opens a session's workspace beneath the
// data directory without following any link: a program that ran with the
// data directory in its workspace could have replaced a component.
func openSessionWorkspace(dataDir, name string) (*workspace.Workspace, error) {
	return workspace.NewBeneath(dataDir, sessionWorkspaceRel(name))
}

// removeSessionDir removes a session's directory (its workspace's parent)
// beneath the data directory, never through a link out of it.
func removeSessionDir(dataDir, name string) error {
	if err := checkSessionName(name); err != nil {
		return err
	}
	root, err := os.OpenRoot(dataDir)
	if err != nil {
		return err
	}
	defer root.Close()
	return root.RemoveAll(path.Join("sessions", name))
}

// removeServerSessionDir removes the directory of a session of the server
// (the parent of its workspace, beneath DATA/server), never through a
// link out of the data directory.
func removeServerSessionDir(dataDir, ws string) error {
	rel, err := filepath.Rel(dataDir, filepath.Dir(ws))
	if err != nil || !strings.HasPrefix(rel, "server"+string(filepath.Separator)) || strings.Contains(rel, "..") {
		return nil // not where the server keeps its sessions: leave it
	}
	root, err := os.OpenRoot(dataDir)
	if err != nil {
		return err
	}
	defer root.Close()
	return root.RemoveAll(rel)
}
