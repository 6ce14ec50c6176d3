// Package store keeps codeagent's sessions, turns, attempts, artifacts,
// kernel cells and the audit log in SQLite (pure Go, WAL mode). The schema
// is migrated at open from SQL files embedded in the binary. Every change
// is a transaction, so a process killed at any point leaves the store consistent:
// at most the turn it was running stays marked running, which readers report
// as interrupted.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

//go:embed migrations/*.sql
var migrations embed.FS

// ErrNotFound is returned when a named session, turn or record is missing.
var ErrNotFound = errors.New("not found")

// Store is an open database. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
	// keepCells bounds the cells kept per session (KeepCells when 0).
	keepCells int
}

// Open opens (creating if needed) the database at path and migrates it.
// The store holds every session's tasks and outputs, so it is kept from
// other local users: its directory is made private (see SecureDir), the
// database is created 0600 before SQLite opens it (SQLite gives the -wal,
// -shm and journal files the database's mode), and any of those files
// left open to others are tightened.
func Open(ctx context.Context, path string) (*Store, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if _, err := SecureDir(dir, filepath.Base(path)); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := privateFiles(path); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "busy_timeout(10000)", "foreign_keys(1)", "synchronous(NORMAL)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate") // writers queue up instead of failing on upgrade
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{db: db, path: path}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s.keepReserve()
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// migrate applies the embedded migrations newer than PRAGMA user_version,
// each in its own transaction.
func (s *Store) migrate(ctx context.Context) error {
	var version int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		n, err := strconv.Atoi(strings.SplitN(filepath.Base(name), "_", 2)[0])
		if err != nil {
			return fmt.Errorf("migration %s: bad name", name)
		}
		if n <= version {
			continue
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", n)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %s: %w", name, err)
		}
	}
	if version > len(names) {
		return fmt.Errorf("the store has schema version %d, newer than this codeagent knows (%d): upgrade codeagent", version, len(names))
	}
	return nil
}

func now() int64 { return time.Now().UnixMilli() }

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms) }

// DirOpenError is a store's directory that is open to other users and that
// SecureDir may not tighten: it holds files that are not the store's, or
// it belongs to another user.
type DirOpenError struct {
	Dir  string
	Mode fs.FileMode
	Why  string
}

func (e *DirOpenError) Error() string {
	return fmt.Sprintf("%s is open to other users (mode %04o) and %s: codeagent will not change its mode; make it private (chmod 700 %s) or choose another directory",
		e.Dir, e.Mode, e.Why, e.Dir)
}

// SecureDir keeps other local users out of dir, the directory of the store
// dbName: a directory open to group or others is made 0700 when it is the
// store's own (it holds dbName, or is empty) and belongs to this process's
// user; any other open directory is refused with a *DirOpenError, since
// its mode is someone's choice. It returns the mode it replaced, 0 when it
// changed nothing. dir is not followed if it is a link.
func SecureDir(dir, dbName string) (fs.FileMode, error) {
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return 0, err // the path is in the error
	}
	defer d.Close()
	fi, err := d.Stat()
	if err != nil {
		return 0, err
	}
	mode := fi.Mode().Perm()
	if mode&0o077 == 0 {
		return 0, nil
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != uint32(os.Geteuid()) {
		return 0, &DirOpenError{Dir: dir, Mode: mode, Why: fmt.Sprintf("belongs to uid %d, not to uid %d, who runs codeagent", uid, os.Geteuid())}
	}
	db, err := os.Lstat(filepath.Join(dir, dbName))
	if err != nil || !db.Mode().IsRegular() {
		names, rerr := d.Readdirnames(1)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return 0, rerr
		}
		if len(names) > 0 {
			return 0, &DirOpenError{Dir: dir, Mode: mode, Why: fmt.Sprintf("holds files but no %s (it may not be codeagent's)", dbName)}
		}
	}
	if err := d.Chmod(0o700); err != nil {
		return 0, err
	}
	return mode, nil
}

// privateFiles creates the database at path 0600 if it is missing, so
// that SQLite, which gives the files it makes beside it the database's
// mode, makes them 0600 too; and tightens to 0600 the database, its -wal,
// -shm and journal and the reserve that exist, belong to this process's
// user and are open to others (made by a codeagent that did not do this).
// A link in their place is refused: SQLite would follow it.
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err == nil {
		err = f.Chmod(0o600) // whatever the umask
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal", path + ".reserve"} {
		if err := tighten(p); err != nil {
			return err
		}
	}
	return nil
}

// tighten makes the file p 0600 when it belongs to this process's user and
// is open to others; a missing file is fine, a link is an error.
func tighten(p string) error {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%s is a symbolic link: codeagent does not make one there", p)
	case err != nil:
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	if fi.Mode().Perm()&0o077 == 0 || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
		return nil
	}
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("make %s private: %w", p, err)
	}
	return nil
}
