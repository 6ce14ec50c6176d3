package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/workspace"
)

// sessionState is what one MCP session owns: its workspace (created on
// first use), its rate limit, and the calls under way.
type sessionState struct {
	label  string // session name in audit records: mcp-<id>, or mcp-<owner>-<id>
	ctx    context.Context
	cancel context.CancelFunc
	limit  *app.SessionLimit // the session's rate limit
	busy   chan struct{}     // held while a call uses the workspace
	calls  sync.WaitGroup

	mu sync.Mutex
	ws *workspace.Workspace
}

var errClosed = errors.New("the server is shutting down")

// workspacePrefix starts the names of the sessions' workspaces.
const workspacePrefix = "codeagent-mcp-"

// session returns the state of req's session, creating it on first use.
// The returned done must be called when the call ends; ctx is cancelled
// when the call's request is or when the session ends.
func (s *Server) session(ctx context.Context, req *mcp.CallToolRequest) (st *sessionState, callCtx context.Context, done func(), err error) {
	ss := req.Session
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, nil, errClosed
	}
	st = s.sessions[ss]
	if st == nil {
		st = s.newSession(req)
		s.sessions[ss] = st
		s.ended.Add(1)
		go func() {
			defer s.ended.Done()
			_ = ss.Wait()
			s.endSession(ss)
		}()
	}
	st.calls.Add(1)
	s.mu.Unlock()
	callCtx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(st.ctx, cancel)
	return st, callCtx, func() { stop(); cancel(); st.calls.Done() }, nil
}

func (s *Server) newSession(req *mcp.CallToolRequest) *sessionState {
	id := req.Session.ID()
	if !labelPart.MatchString(id) {
		id = randomID()
	}
	label := "mcp-" + id
	if ex := req.Extra; ex != nil && ex.TokenInfo != nil && labelPart.MatchString(ex.TokenInfo.UserID) {
		label = "mcp-" + ex.TokenInfo.UserID + "-" + id
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &sessionState{label: label, ctx: ctx, cancel: cancel, busy: make(chan struct{}, 1),
		limit: app.NewSessionLimit(s.cfg.ExecsPerMinute)}
}

var labelPart = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// endSession cancels the session's calls, waits for them (the sandbox kills
// their programs) and removes its workspace.
func (s *Server) endSession(ss *mcp.ServerSession) {
	s.mu.Lock()
	st := s.sessions[ss]
	delete(s.sessions, ss)
	s.mu.Unlock()
	if st == nil {
		return
	}
	st.cancel()
	st.calls.Wait()
	if s.deps.Kernels != nil {
		s.deps.Kernels.Forget(kernelKey(st))
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ws != nil {
		if err := st.ws.Close(); err != nil { // a temporary workspace: removed, mounts below it kept
			s.log.Warn("remove session workspace", "dir", st.ws.Dir, "err", err)
		}
		st.ws = nil
	}
	s.log.Debug("MCP session ended", "session", st.label)
}

// endAll ends every session and waits for the cleanups.
func (s *Server) endAll() {
	s.mu.Lock()
	var all []*mcp.ServerSession
	for ss := range s.sessions {
		all = append(all, ss)
	}
	s.mu.Unlock()
	for _, ss := range all {
		s.endSession(ss)
		_ = ss.Close()
	}
	s.ended.Wait()
}

// workspace returns the session's workspace, created on first use.
func (s *Server) workspace(st *sessionState) (*workspace.Workspace, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ctx.Err() != nil {
		return nil, errors.New("the MCP session has ended")
	}
	if st.ws == nil {
		// The work directory may lie where an earlier program could have
		// planted a link: it is resolved as a user's workspace path is,
		// and the session's directory is made beneath it without
		// following one.
		base, err := workspace.MkdirAll(s.cfg.WorkDir, 0o755)
		if err != nil {
			return nil, fmt.Errorf("work directory %s: %w", s.cfg.WorkDir, err)
		}
		ws, err := workspace.NewTemp(base, workspacePrefix)
		if err != nil {
			return nil, err
		}
		st.ws = ws
	}
	return st.ws, nil
}

// lock takes the session's workspace for a call that writes or runs in it,
// waiting for the call before it while ctx allows.
func (st *sessionState) lock(ctx context.Context) (unlock func(), err error) {
	select {
	case st.busy <- struct{}{}:
		return func() { <-st.busy }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the session's previous call: %w", ctx.Err())
	}
}

// startExec records a call of the session that runs programs or cells
// (app.StartExec): under the session's rate limit, waited for at most
// maxRateWait, and audited under its label once the limit admits each.
func (s *Server) startExec(ctx context.Context, st *sessionState, rec app.AuditRecord) (*app.Exec, error) {
	return app.StartExec(ctx, app.ExecRequest{Store: s.deps.Store, Session: st.label, Audit: rec, Sandbox: s.deps.Sandbox,
		Limit: st.limit, MaxWait: maxRateWait, Logger: s.log})
}

// lockedWorkspace takes a session's workspace for a call that writes or runs
// in it, with files written first; unlock lets the next such call in.
func (s *Server) lockedWorkspace(ctx context.Context, st *sessionState, files map[string]string) (ws *workspace.Workspace, unlock func(), err error) {
	if unlock, err = st.lock(ctx); err != nil {
		return nil, nil, err
	}
	if ws, err = s.workspace(st); err != nil {
		unlock()
		return nil, nil, err
	}
	sizes := make(map[string]int64, len(files))
	for name, data := range files {
		sizes[name] = int64(len(data))
	}
	if len(files) > 0 {
		err = s.checkQuota(ws, sizes)
	}
	if err != nil {
		unlock()
		return nil, nil, err
	}
	for name, data := range files {
		if err := ws.WriteFile(name, []byte(data)); err != nil {
			unlock()
			return nil, nil, err
		}
	}
	return ws, unlock, nil
}
