package mcpserver

import (
	"fmt"
	"os"

	"github.com/codeagent/codeagent/workspace"
)

// checkQuota refuses writing files (name → size) to a session's workspace
// when it would then hold more than Config.SessionMaxFiles entries or
// SessionMaxBytes bytes; a file replacing one counts only its growth. The
// caller holds the session's workspace lock.
func (s *Server) checkQuota(ws *workspace.Workspace, files map[string]int64) error {
	u, err := ws.Usage(s.cfg.SessionMaxFiles)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(ws.Dir)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	defer root.Close()
	entries, bytes := u.Entries, u.Bytes
	for name, size := range files {
		bytes += size
		if fi, err := root.Lstat(name); err != nil {
			entries++
		} else if fi.Mode().IsRegular() {
			bytes -= fi.Size()
		}
	}
	switch {
	case u.Over || entries > s.cfg.SessionMaxFiles:
		return fmt.Errorf("the session's workspace may hold at most %d files and directories: nothing was written", s.cfg.SessionMaxFiles)
	case bytes > s.cfg.SessionMaxBytes:
		return fmt.Errorf("the session's workspace may hold at most %d bytes of files: nothing was written", s.cfg.SessionMaxBytes)
	}
	return nil
}
