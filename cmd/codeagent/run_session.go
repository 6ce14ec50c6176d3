package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/manifest"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/session"
	"github.com/codeagent/codeagent/store"
)

// applyManifest layers the manifest (if any) under the flags: limits of the
// language's tool, max iterations, the safety policy, and provider and model
// under the environment. It refuses a language whose tool is not listed.
func (o *runOptions) applyManifest() (*manifest.Manifest, *safety.Policy, error) {
	limits := sandbox.DefaultLimits()
	if o.Manifest == "" {
		o.Limits = limits.Overlay(o.Limits)
		return nil, nil, nil
	}
	m, err := manifest.Load(o.Manifest)
	if err != nil {
		return nil, nil, usageError{err}
	}
	tool, err := m.ToolFor(o.Lang)
	if err != nil {
		return nil, nil, usageError{err}
	}
	o.Limits = tool.Limits(limits).Overlay(o.Limits)
	if n := m.Agent.Limits.MaxIterations; n > 0 && !o.setFlags["max-iterations"] {
		o.MaxIterations = n
	}
	var policy *safety.Policy
	switch {
	case m.Agent.Policy.Inline != nil:
		policy, err = safety.ParsePolicy(m.Agent.Policy.Inline)
	case m.Agent.Policy.Path != "":
		policy, err = safety.LoadPolicy(m.PolicyPath())
	}
	if err != nil {
		return nil, nil, usagef("%s: agent.policy: %w", m.File(), err)
	}
	// The file is the lowest layer: the environment and flags win.
	getenv := o.Getenv
	o.Getenv = func(k string) string {
		if v := getenv(k); v != "" {
			return v
		}
		switch k {
		case llm.EnvProvider:
			return m.Agent.Provider
		case llm.EnvModel:
			return m.Agent.Model
		}
		return ""
	}
	return m, policy, nil
}

// openSession returns the named session (created if new) and the summary
// of its earlier turns, or nil when name is "". Turns left running by a
// killed process are marked interrupted first.
func openSession(ctx context.Context, st *store.Store, dataDir, name string) (*store.Session, string, error) {
	if name == "" {
		return nil, "", nil
	}
	sess, err := st.SessionByName(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		sess, err = st.CreateSession(ctx, name, sessionWorkspace(dataDir, name))
	}
	if err != nil {
		return nil, "", err
	}
	if err := st.MarkInterrupted(ctx, sess.ID); err != nil {
		return nil, "", err
	}
	turns, err := st.Turns(ctx, sess.ID)
	if err != nil {
		return nil, "", err
	}
	return &sess, session.Summary(turns), nil
}

// finishTurn records the outcome of a session's turn. A failure to record
// is logged: the run itself is done.
func finishTurn(ctx context.Context, st *store.Store, t store.Turn, res *agent.Result, rec *session.Recorder, dir string, log *slog.Logger) {
	t.Status = store.TurnFailed
	if res.Success {
		t.Status = store.TurnSucceeded
	}
	t.Code, t.Output, t.Attempts = res.Code, res.Output, res.Attempts
	t.InputTokens, t.OutputTokens = res.Usage.InputTokens, res.Usage.OutputTokens
	t.ModelTime, t.SandboxTime = rec.Totals()
	t.Artifacts = session.ArtifactRecords(dir, res.Artifacts)
	if err := st.FinishTurn(context.WithoutCancel(ctx), t); err != nil {
		log.Warn("record turn", "err", err)
	}
}

func newRunID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
