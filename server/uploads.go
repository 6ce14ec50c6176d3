package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/codeagent/codeagent/workspace"
)

// An upload stores the files of one request in a session's workspace, all
// or none, within the caps: at most MaxUploadFiles files of at most
// MaxUpload bytes each, and the session's workspace at most
// SessionMaxFiles entries and SessionMaxBytes bytes afterwards. Each file
// is written to a temporary file first, never more than its room, and
// renamed into place only when every one has fit. Uploads to one session
// take turns, so that two at once cannot both pass its quota.
type upload struct {
	s      *Server
	root   *os.Root
	usage  workspace.Usage
	files  []stagedFile
	names  map[string]bool
	added  int   // entries the upload adds
	grown  int64 // bytes it adds, net of the files it replaces
	unlock func()
}

type stagedFile struct {
	name, tmp string
	size      int64
}

func filesQuota(max int) error {
	return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "quota_exceeded",
		Message: fmt.Sprintf("the session's workspace may hold at most %d files and directories: delete some first", max)}
}

func bytesQuota(max int64) error {
	return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "quota_exceeded",
		Message: fmt.Sprintf("the session's workspace may hold at most %d bytes of files: delete some first", max)}
}

func tooManyFiles(max int) error {
	return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "too_many_files",
		Message: fmt.Sprintf("at most %d files per upload request; nothing was stored", max)}
}

// beginUpload takes the session's turn (waiting while ctx allows) and
// measures its workspace. end must be called.
func (s *Server) beginUpload(ctx context.Context, root *os.Root, dir string) (*upload, error) {
	unlock, err := s.uploadLocks.lock(ctx, dir)
	if err != nil {
		return nil, err
	}
	u, err := (&workspace.Workspace{Dir: dir}).Usage(s.cfg.SessionMaxFiles)
	if err != nil {
		unlock()
		return nil, err
	}
	if u.Over {
		unlock()
		return nil, filesQuota(s.cfg.SessionMaxFiles)
	}
	return &upload{s: s, root: root, usage: u, names: map[string]bool{}, unlock: unlock}, nil
}

// add writes body to a temporary file for name, refusing it when it would
// take the session over a quota.
func (u *upload) add(name string, body io.Reader) error {
	cfg := u.s.cfg
	if u.names[name] {
		return badRequest("%s is given twice in the upload", name)
	}
	if len(u.files) >= cfg.MaxUploadFiles {
		return tooManyFiles(cfg.MaxUploadFiles)
	}
	var old int64
	isNew := true
	if fi, err := u.root.Lstat(name); err == nil {
		if fi.IsDir() {
			return conflict("%s is a directory in the workspace", name)
		}
		isNew = false
		if fi.Mode().IsRegular() {
			old = fi.Size()
		}
	}
	if isNew && u.usage.Entries+u.added+1 > cfg.SessionMaxFiles {
		return filesQuota(cfg.SessionMaxFiles)
	}
	room := cfg.SessionMaxBytes - u.usage.Bytes - u.grown + old
	limit := min(cfg.MaxUpload, max(room, 0))
	var b [8]byte
	_, _ = rand.Read(b[:])
	tmp := ".upload-" + hex.EncodeToString(b[:])
	// Created exclusively without following links; the rename in commit
	// replaces a link rather than its target.
	f, err := u.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("upload %s: %w", name, err)
	}
	n, err := io.Copy(storeWriter{f}, io.LimitReader(body, limit+1))
	if cerr := f.Close(); err == nil && cerr != nil {
		err = errStore{cerr}
	}
	switch {
	case err != nil:
		err = uploadError(err)
	case n > limit && limit == cfg.MaxUpload:
		err = &http.MaxBytesError{Limit: cfg.MaxUpload}
	case n > limit:
		err = bytesQuota(cfg.SessionMaxBytes)
	}
	if err != nil {
		_ = u.root.Remove(tmp)
		return err
	}
	u.files = append(u.files, stagedFile{name: name, tmp: tmp, size: n})
	u.names[name] = true
	u.grown += n - old
	if isNew {
		u.added++
	}
	return nil
}

// storeWriter tells the server's own write errors (a full disk) from the
// client's read errors in an upload's copy.
type storeWriter struct{ w io.Writer }

// errStore marks a failure to store what was received.
type errStore struct{ err error }

func (e errStore) Error() string { return "store the upload: " + e.err.Error() }
func (e errStore) Unwrap() error { return e.err }

func (s storeWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil {
		err = errStore{err}
	}
	return n, err
}

// commit renames every staged file into place.
func (u *upload) commit() ([]fileJSON, error) {
	out := make([]fileJSON, 0, len(u.files))
	for i, f := range u.files {
		if err := u.root.Rename(f.tmp, f.name); err != nil {
			u.files = u.files[i:]
			return nil, errStore{err}
		}
		ct, _ := contentType(f.name)
		out = append(out, fileJSON{Path: f.name, Size: f.size, Modified: time.Now().UTC(), ContentType: ct})
	}
	u.files = nil
	return out, nil
}

// end removes what was staged but not committed and gives the session's
// turn to the next upload.
func (u *upload) end() {
	for _, f := range u.files {
		_ = u.root.Remove(f.tmp)
	}
	u.files = nil
	u.unlock()
}

// sessionLocks gives each session's uploads their turn.
type sessionLocks struct {
	mu sync.Mutex
	m  map[string]*sessionLock
}

type sessionLock struct {
	ch   chan struct{}
	refs int
}

func (l *sessionLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*sessionLock{}
	}
	e := l.m[key]
	if e == nil {
		e = &sessionLock{ch: make(chan struct{}, 1)}
		l.m[key] = e
	}
	e.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
	select {
	case e.ch <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-e.ch; release() }) }, nil
	case <-ctx.Done():
		release()
		return nil, fmt.Errorf("waiting for another upload to the session: %w", ctx.Err())
	}
}
