package app

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/store"
)

// Kernels are a process's kept kernels, one per session (a
// kernel.Manager), whose cells go through the executions' queue and are
// counted by their door like every other execution: the HTTP API's cells
// and runs, and MCP's execute_code with keep_state.
type Kernels struct {
	*kernel.Manager
	// Executions queue and count the cells; nil runs them at once (a
	// process with one client, `codeagent mcp`).
	Executions *Executions
}

// KernelsConfig are the settings of a process's kept kernels.
type KernelsConfig struct {
	// Sandbox starts the kernels; Limits bound each over its life (zero
	// fields take kernel.DefaultLimits').
	Sandbox sandbox.Sandbox
	Limits  sandbox.Limits
	// Max caps the live kernels (default 4 per CPU: then the least
	// recently used idle one is ended); IdleTimeout ends an idle kernel
	// (default kernel.DefaultIdleTimeout).
	Max         int
	IdleTimeout time.Duration
	Logger      *slog.Logger
}

// NewKernels starts a process's kept kernels with c, their cells under ex
// (nil: none). Close ends them.
func NewKernels(c KernelsConfig, ex *Executions) *Kernels {
	m := kernel.NewManager(kernel.ManagerConfig{Options: kernel.Options{Sandbox: c.Sandbox, Limits: c.Limits},
		Max: c.Max, IdleTimeout: c.IdleTimeout, Logger: c.Logger})
	return &Kernels{Manager: m, Executions: ex}
}

// Exec runs c in key's kernel (started in workspace ws if it is not
// running) through the queue under source; bounded refuses it with a
// *QueueFullError when the queue is full instead of waiting. A cell the
// kernel refused (busy, ended) is not counted as an execution.
func (k *Kernels) Exec(ctx context.Context, source string, bounded bool, key kernel.Key, ws string, c kernel.Cell) (kernel.Result, error) {
	if k.Executions == nil {
		return k.Manager.Exec(ctx, key, ws, c)
	}
	var res kernel.Result
	_, err := k.Executions.Do(ctx, source, bounded, func() (sandbox.Result, error) {
		var err error
		if res, err = k.Manager.Exec(ctx, key, ws, c); err != nil {
			return res.Result, NotRun{Err: err}
		}
		return res.Result, nil
	})
	return res, err
}

// Redactor removes secrets from text (agent.Redactor): a door redacts the
// cells it keeps with the secrets its runs' output is redacted of.
type Redactor = agent.Redactor

// NewRedactor returns a Redactor of secrets and the common key patterns.
func NewRedactor(secrets ...string) *Redactor { return agent.NewRedactor(secrets...) }

// keptMIME are the MIME types of a cell's displays that are kept: texts.
// Images are the workspace's files (the display's File, the cell's
// Images), not kept twice.
var keptMIME = []string{"text/plain", "text/html", "text/markdown"}

// KeepCell records in st the cell code that ran in the kernel of the
// session sessionID and has just ended with res, for the session's
// history (GET /v1/sessions/{id}/cells): its code as it ran but for the
// secrets r knows (Redactor.Code: a pattern never rewrites code), its
// output, displays' texts and error redacted with r, then cut to
// store.MaxCellText each (the
// displays' texts together), and the names of its figures. Its start is
// its end less its wall time.
func KeepCell(ctx context.Context, st *store.Store, r *Redactor, sessionID, code string, res kernel.Result) (store.Cell, error) {
	type shown struct {
		Kind string            `json:"kind"`
		Data map[string]string `json:"data"`
		File string            `json:"file,omitempty"`
	}
	budget := store.MaxCellText
	display := []shown{}
	for _, d := range res.Display {
		v := shown{Kind: d.Kind, File: d.File, Data: map[string]string{}}
		for _, mime := range keptMIME {
			text, ok := d.Data[mime]
			if !ok || budget <= 0 {
				continue
			}
			text = store.CutText(r.String(text), budget)
			budget -= len(text)
			v.Data[mime] = text
		}
		display = append(display, v)
	}
	b, err := json.Marshal(display)
	if err != nil {
		return store.Cell{}, err
	}
	return st.AddCell(ctx, store.Cell{SessionID: sessionID, ExecutionCount: res.ExecutionCount,
		StartedAt: time.Now().Add(-res.WallTime), Wall: res.WallTime,
		Code: r.Code(code), Stdout: string(r.Bytes(res.Stdout)), Stderr: string(r.Bytes(res.Stderr)),
		Display: b, Images: res.Images, Status: res.Status.String(), ExitCode: res.ExitCode,
		Message: r.String(res.Message), ErrorName: r.String(res.ErrorName), ErrorValue: r.String(res.ErrorValue),
		KernelDied: res.KernelDied, KernelRestarted: res.KernelRestarted, RestartReason: res.RestartReason})
}
