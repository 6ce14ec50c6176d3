package session

import (
	"context"
	"sync"

	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/sandbox"
)

// NewKernel starts a kernel for a tool-mode run's cells (agent.Task's
// NewKernel): it runs in the run's sandbox (its start counted by the rate
// limit and audited) and each cell is recorded in the audit log before it
// runs (Recorder.Cell), so that nothing runs unrecorded. The caller closes
// it; Finish and Close end any left running.
func (r *Run) NewKernel(opts kernel.Options) kernel.Interpreter {
	opts.Sandbox = r.Sandbox
	ks := kernel.NewSession(opts)
	r.kmu.Lock()
	r.kernels = append(r.kernels, ks)
	r.kmu.Unlock()
	return &auditedKernel{rec: r.Rec, exec: ks.Exec, restart: ks.Restart, close: ks.Close}
}

// KeptKernel is a kernel that outlives the run (a server's or an MCP
// session's, kept by a kernel.Manager) as a tool-mode run's interpreter:
// exec runs a cell in it, each recorded first by rec (which may be nil),
// restart restarts it, and Close leaves it to its session.
func KeptKernel(rec *Recorder, exec func(context.Context, kernel.Cell) (kernel.Result, error), restart func()) kernel.Interpreter {
	return &auditedKernel{rec: rec, exec: exec,
		restart: func(context.Context) error { restart(); return nil },
		close:   func() error { return nil }}
}

// auditedKernel is a kernel whose cells are recorded before they run.
type auditedKernel struct {
	rec     *Recorder
	exec    func(context.Context, kernel.Cell) (kernel.Result, error)
	restart func(context.Context) error
	close   func() error
}

// Exec implements kernel.Interpreter.
func (k *auditedKernel) Exec(ctx context.Context, c kernel.Cell) (kernel.Result, error) {
	var res kernel.Result
	_, err := k.rec.Cell(c.Code, c.Timeout, func() (sandbox.Result, error) {
		var err error
		res, err = k.exec(ctx, c)
		return res.Result, err
	})
	return res, err
}

// Restart implements kernel.Interpreter.
func (k *auditedKernel) Restart(ctx context.Context) error { return k.restart(ctx) }

// Close implements kernel.Interpreter.
func (k *auditedKernel) Close() error { return k.close() }

// closeKernels ends the kernels NewKernel started.
func (r *Run) closeKernels() {
	r.kmu.Lock()
	ks := r.kernels
	r.kernels = nil
	r.kmu.Unlock()
	var wg sync.WaitGroup
	for _, k := range ks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = k.Close()
		}()
	}
	wg.Wait()
}
