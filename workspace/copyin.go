package workspace

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// Update is what UpdateIn did with an input file.
type Update int

// The outcomes of UpdateIn.
const (
	Added     Update = iota // the workspace had no file of that name
	Replaced                // it had one with other contents: now the input's
	Unchanged               // it had the same contents: left as it was
)

// UpdateIn copies the regular file src into the workspace under its base
// name, as CopyIn does, except that a regular file already there (a
// session's copy from an earlier turn) is replaced when its contents
// differ and left alone when they are the same. Anything else of that
// name (a directory, a link) is refused. The replacement is whole: the new
// contents are written beside it and renamed over it, no link followed.
func (w *Workspace) UpdateIn(src string, maxSize int64) (string, Update, error) {
	name := filepath.Base(src)
	if !ValidName(name) {
		return name, Added, fmt.Errorf("input %s: the file name must be plain letters, digits, '.', '_', '-', '+' or spaces", src)
	}
	root, err := os.OpenRoot(w.Dir)
	if err != nil {
		return name, Added, fmt.Errorf("workspace: %w", err)
	}
	defer root.Close()
	fi, err := root.Lstat(name)
	if err != nil {
		n, err := w.CopyIn(src, maxSize)
		return n, Added, err
	}
	if !fi.Mode().IsRegular() {
		return name, Added, fmt.Errorf("input %s: %s is in the workspace and is not a regular file", src, name)
	}
	data, err := readInput(src, maxSize)
	if err != nil {
		return name, Added, err
	}
	old, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return name, Added, fmt.Errorf("input %s: %w", src, err)
	}
	have, err := io.ReadAll(io.LimitReader(old, int64(len(data))+1))
	old.Close()
	if err != nil {
		return name, Added, fmt.Errorf("input %s: %w", src, err)
	}
	if bytes.Equal(have, data) {
		return name, Unchanged, nil
	}
	tmp := "." + name + ".codeagent-new"
	_ = root.Remove(tmp)
	out, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return name, Added, fmt.Errorf("input %s: %w", src, err)
	}
	_, err = out.Write(data)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return name, Added, fmt.Errorf("input %s: %w", src, err)
	}
	return name, Replaced, nil
}

// readInput reads the regular file src, at most maxSize bytes (0: no
// bound).
func readInput(src string, maxSize int64) ([]byte, error) {
	in, err := os.Open(src)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	switch {
	case err != nil:
		return nil, fmt.Errorf("input: %w", err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("input %s is not a regular file", src)
	case maxSize > 0 && fi.Size() > maxSize:
		return nil, fmt.Errorf("input %s is larger than %d bytes", src, maxSize)
	}
	return io.ReadAll(in)
}
