package backendkit

import (
	"fmt"

	"github.com/codeagent/codeagent/sandbox"
)

// ResolveWorkspace returns the absolute, link-free form of a workspace
// directory given by a caller, resolved as sandbox.ResolveDir does, and
// refuses a directory that must never be one (see
// sandbox.CheckWorkspaceDir): whatever the front door, no backend mounts
// /etc or a home read-write.
func ResolveWorkspace(dir string) (string, error) {
	resolved, err := sandbox.ResolveDir(dir)
	if err != nil {
		return "", err
	}
	if err := sandbox.CheckWorkspaceDir(resolved); err != nil {
		return "", fmt.Errorf("workspace %s: %w", dir, err)
	}
	return resolved, nil
}
