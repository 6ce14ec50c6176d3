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
	k := &auditedKernel{Session: kernel.NewSession(opts), rec: r.Rec}
	r.kmu.Lock()
	r.kernels = append(r.kernels, k)
	r.kmu.Unlock()
	return k
}

// auditedKernel is a kernel whose cells are recorded first.
type auditedKernel struct {
	*kernel.Session
	rec *Recorder
}

// Exec implements kernel.Interpreter.
func (k *auditedKernel) Exec(ctx context.Context, c kernel.Cell) (kernel.Result, error) {
	var res kernel.Result
	_, err := k.rec.Cell(c.Code, c.Timeout, func() (sandbox.Result, error) {
		var err error
		res, err = k.Session.Exec(ctx, c)
		return res.Result, err
	})
	return res, err
}

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
