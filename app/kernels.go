package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/sandbox"
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
