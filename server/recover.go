package server

import (
	"context"

	"github.com/codeagent/codeagent/workspace"
)

// execPrefix starts the names of the temporary workspaces of /v1/exec;
// each also carries its process's tag, so that a later server removes
// those of a dead one and never those of a live one.
const execPrefix = "codeagent-exec-"

// recover cleans up after a server of this data directory that died
// (kill -9, a crash): the turns it left running, whose lease no live
// process holds, become interrupted, with a record closing their runs in
// the audit log, and its temporary workspaces are removed. The sandbox
// backends do the same for their own leftovers when they start.
func (s *Server) recover() {
	ctx := context.Background()
	n, err := s.deps.Store.InterruptOrphans(ctx, "the server running it stopped without finishing it")
	if err != nil {
		s.log.Warn("recover interrupted runs", "err", err)
	} else if n > 0 {
		s.log.Info("marked runs of a process that died as interrupted", "runs", n)
	}
	if tmp, err := workspace.TempDir(); err == nil {
		if n, err := workspace.SweepTemp(tmp, execPrefix); err != nil {
			s.log.Warn("remove temporary workspaces of a process that died", "err", err)
		} else if n > 0 {
			s.log.Info("removed temporary workspaces of a process that died", "workspaces", n)
		}
	}
}
