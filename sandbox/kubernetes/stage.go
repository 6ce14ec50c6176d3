package kubernetes

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/codeagent/codeagent/sandbox"
)

// chunkSize is the file content carried by one frame.
const chunkSize = 256 << 10

// stageIn sends the workspace tree ws (opened without following links:
// a link planted in it is sent as a link) and spec's files to the agent,
// then frameStaged. Regular files, directories and symbolic links go;
// other kinds, and file systems mounted below ws, stay behind; permission
// bits only. It returns the set of
// paths sent, which the copy back compares with what the Pod has.
func stageIn(a *frameWriter, ws string, files []sandbox.File) (map[string]bool, error) {
	sent := map[string]bool{}
	err := walkTree(ws, func(rel string, fi fs.FileInfo, root *os.Root) error {
		perm := uint32(fi.Mode().Perm())
		var err error
		switch {
		case fi.IsDir():
			err = a.queue(frameDir, append(be32(perm), rel...))
		case fi.Mode().IsRegular():
			err = sendFile(a, root, rel, perm)
		default: // a link
			var target string
			if target, err = root.Readlink(rel); err == nil {
				err = a.queue(frameLink, append(append(be16(len(rel)), rel...), target...))
			}
		}
		if err == nil {
			sent[rel] = true
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("send workspace: %w", err)
	}
	for _, f := range files {
		h := append(be32(0o444), be64(uint64(len(f.Data)))...)
		if err := a.queue(frameCode, append(h, f.Path...)); err != nil {
			return nil, fmt.Errorf("send %s: %w", f.Path, err)
		}
		for off := 0; off < len(f.Data); off += chunkSize {
			end := min(off+chunkSize, len(f.Data))
			if err := a.queue(frameChunk, append(be64(uint64(off)), f.Data[off:end]...)); err != nil {
				return nil, fmt.Errorf("send %s: %w", f.Path, err)
			}
		}
	}
	if err := a.send(frameStaged, nil); err != nil {
		return nil, fmt.Errorf("send workspace: %w", err)
	}
	return sent, nil
}

// sendFile sends regular file rel of root, leaving out blocks of zeros.
func sendFile(a *frameWriter, root *os.Root, rel string, perm uint32) error {
	in, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is no longer a regular file", rel)
	}
	h := append(be32(perm), be64(uint64(fi.Size()))...)
	if err := a.queue(frameFile, append(h, rel...)); err != nil {
		return err
	}
	buf := make([]byte, chunkSize)
	zero := make([]byte, chunkSize)
	for off := int64(0); ; {
		n, err := in.ReadAt(buf, off)
		if n > 0 && !bytes.Equal(buf[:n], zero[:n]) {
			if serr := a.queue(frameChunk, append(be64(uint64(off)), buf[:n]...)); serr != nil {
				return serr
			}
		}
		off += int64(n)
		if err == io.EOF || n == 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func be16(n int) []byte {
	return binary.BigEndian.AppendUint16(nil, uint16(n))
}

func be32(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func be64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// validRel reports whether p is a clean relative path inside the workspace.
func validRel(p string) bool {
	if p == "" || p == "." || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}
