package session

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"syscall"

	"github.com/codeagent/codeagent/store"
	"github.com/codeagent/codeagent/workspace"
)

// ArtifactRecords hashes a run's artifacts for the store. A file that is
// gone, not regular, or behind a symlink is recorded without a hash.
func ArtifactRecords(dir string, arts []workspace.Artifact) []store.Artifact {
	root, err := os.OpenRoot(dir)
	if err == nil {
		defer root.Close()
	}
	out := make([]store.Artifact, len(arts))
	for i, a := range arts {
		out[i] = store.Artifact{Path: a.Path, Size: a.Size}
		if root != nil {
			out[i].SHA256 = fileHash(root, a.Path)
		}
	}
	return out
}

func fileHash(root *os.Root, name string) string {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}
