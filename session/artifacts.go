package session

import (
	"crypto/sha256"
	"encoding/hex"
	"io"

	"github.com/codeagent/codeagent/store"
	"github.com/codeagent/codeagent/workspace"
)

// ArtifactRecords hashes a run's artifacts for the store. A file that is
// gone, not regular, or behind a symlink is recorded without a hash.
func ArtifactRecords(dir string, arts []workspace.Artifact) []store.Artifact {
	ws := &workspace.Workspace{Dir: dir}
	out := make([]store.Artifact, len(arts))
	for i, a := range arts {
		out[i] = store.Artifact{Path: a.Path, Size: a.Size, SHA256: fileHash(ws, a.Path)}
	}
	return out
}

func fileHash(ws *workspace.Workspace, name string) string {
	f, _, err := ws.OpenRegular(name)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}
