// Package app is the layer between codeagent's doors (the command line,
// the HTTP server, MCP) and its libraries: what every door shares when it
// turns a request into work. The doors decode, call app, and encode:
//
//   - StartRun (run.go) assembles an agent run: the session's lease and
//     turn, the provider, the checker, the agent and its kernel.
//   - StartExec and Program (exec.go, program.go) record a door's
//     executions and turn a client's program into a sandbox.Spec.
//   - Executions (here) and Kernels (kernels.go) put every execution and
//     cell of a process under one queue and one set of metrics.
//   - Network and the limits (network.go, limits.go) bound what a request
//     may ask for.
//   - Describe (errors.go) gives every error its class, which each door
//     maps once: exit statuses, HTTP statuses, MCP tool errors.
//   - Validate (validate.go) holds the rules of a run, a program and a
//     cell, written once.
//
// A door encodes and decodes the libraries' own types where they live
// (agent's events, results and approvals, kernel's cells), but calls
// no function of agent or kernel: that work is app's (TestDoorsAreTransports).
//
// Every execution from every door goes through the same layers around the
// backend, stacked by sandbox.Stack, whose comment gives their order and
// why: StartRun (through session.Start) and StartExec add the rate limit
// and the audit over the door's sandbox, which Executions.Sandbox gives
// under the queue, over the backend that backends.Open gave with its
// egress proxy.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// Executions are a process's executions in its sandbox: its backend under
// one Queue, with one set of counters, shared by every door of the process
// (the HTTP API, its runs and kernel cells, and MCP at /mcp).
type Executions struct {
	backend sandbox.Sandbox
	queue   *Queue

	mu         sync.Mutex
	executions map[[2]string]uint64 // {source, status}
	durations  map[string]*histogram
	rejected   uint64
}

// NewExecutions returns backend (with its egress proxy) under a queue of
// workers slots (2 × CPUs when 0) and length waiting places (4 × workers
// when 0). It does not close backend.
func NewExecutions(backend sandbox.Sandbox, workers, length int) *Executions {
	workers, length = QueueSize(workers, length)
	return &Executions{backend: backend, queue: NewQueue(workers, length),
		executions: map[[2]string]uint64{}, durations: map[string]*histogram{}}
}

// QueueSize returns workers and length with their defaults for 0: 2 × CPUs
// workers, 4 × workers waiting places.
func QueueSize(workers, length int) (int, int) {
	if workers <= 0 {
		workers = 2 * runtime.NumCPU()
	}
	if length <= 0 {
		length = 4 * workers
	}
	return workers, length
}

// Queue is the executions' queue (its Close refuses what waits).
func (e *Executions) Queue() *Queue { return e.queue }

// NotRun is an error of Do's run saying that no execution took place (a
// kernel refused the cell: busy, stopped): Do returns Err and counts
// nothing.
type NotRun struct{ Err error }

func (e NotRun) Error() string { return e.Err.Error() }
func (e NotRun) Unwrap() error { return e.Err }

// Do runs one execution in a worker's slot: it waits for one (bounded:
// refused with a *QueueFullError when the queue is full), runs run, and
// counts the result under source (exec, run, kernel, mcp); an error of
// run is counted as a sandbox error, unless it is a NotRun.
func (e *Executions) Do(ctx context.Context, source string, bounded bool, run func() (sandbox.Result, error)) (sandbox.Result, error) {
	release, err := e.queue.Acquire(ctx, bounded)
	if err != nil {
		var qf *QueueFullError
		if errors.As(err, &qf) {
			e.mu.Lock()
			e.rejected++
			e.mu.Unlock()
		}
		return sandbox.Result{}, err
	}
	defer release()
	res, err := run()
	var nr NotRun
	if errors.As(err, &nr) {
		return res, nr.Err
	}
	status := res.Status.String()
	if err != nil {
		status = sandbox.StatusSandboxError.String()
	}
	e.count(source, status, res.WallTime)
	return res, err
}

// Sandbox is the backend as a door's executions reach it: under the queue
// (sandbox.Stack's Queue layer), each Run in a worker's slot (see Do),
// counted under source. Closing it does nothing: the owner of the
// Executions closes the backend.
func (e *Executions) Sandbox(source string, bounded bool) sandbox.Sandbox {
	return sandbox.Stack(e.backend, sandbox.Layers{Queue: func(next sandbox.Sandbox) sandbox.Sandbox {
		return &queued{e: e, source: source, bounded: bounded, next: next}
	}})
}

type queued struct {
	e       *Executions
	source  string
	bounded bool
	next    sandbox.Sandbox
}

func (q *queued) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	return q.e.Do(ctx, q.source, q.bounded, func() (sandbox.Result, error) { return q.next.Run(ctx, spec) })
}

func (q *queued) Close() error { return nil }

// durationBuckets are the upper bounds, in seconds, of the execution
// duration histogram.
var durationBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

type histogram struct {
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
	n      uint64
}

func (e *Executions) count(source, status string, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.executions[[2]string{source, status}]++
	h := e.durations[source]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(durationBuckets)+1)}
		e.durations[source] = h
	}
	sec := d.Seconds()
	h.counts[sort.SearchFloat64s(durationBuckets, sec)]++
	h.sum += sec
	h.n++
}

// WriteMetrics writes the executions' counters and the queue's gauges in
// the Prometheus text format 0.0.4.
func (e *Executions) WriteMetrics(w io.Writer) {
	workers, busy, length, waiting := e.queue.Stats()
	e.mu.Lock()
	defer e.mu.Unlock()
	Header(w, "codeagent_executions_total", "counter", "Executions in the sandbox by source (exec, run, kernel, mcp) and status.")
	keys := make([][2]string, 0, len(e.executions))
	for k := range e.executions {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		fmt.Fprintf(w, "codeagent_executions_total{source=%q,status=%q} %d\n", k[0], k[1], e.executions[k])
	}
	Header(w, "codeagent_execution_duration_seconds", "histogram", "Wall time of executions, queue wait excluded.")
	sources := make([]string, 0, len(e.durations))
	for s := range e.durations {
		sources = append(sources, s)
	}
	sort.Strings(sources)
	for _, src := range sources {
		h := e.durations[src]
		var cum uint64
		for i, le := range durationBuckets {
			cum += h.counts[i]
			fmt.Fprintf(w, "codeagent_execution_duration_seconds_bucket{source=%q,le=%q} %d\n", src, fmtFloat(le), cum)
		}
		fmt.Fprintf(w, "codeagent_execution_duration_seconds_bucket{source=%q,le=\"+Inf\"} %d\n", src, h.n)
		fmt.Fprintf(w, "codeagent_execution_duration_seconds_sum{source=%q} %s\n", src, fmtFloat(h.sum))
		fmt.Fprintf(w, "codeagent_execution_duration_seconds_count{source=%q} %d\n", src, h.n)
	}
	Header(w, "codeagent_executions_rejected_total", "counter", "Executions refused because the queue was full.")
	fmt.Fprintf(w, "codeagent_executions_rejected_total %d\n", e.rejected)
	for _, g := range []struct {
		name, help string
		v          int
	}{
		{"codeagent_exec_workers", "Executions that may run at once.", workers},
		{"codeagent_exec_workers_busy", "Executions running now.", busy},
		{"codeagent_exec_queue_capacity", "Executions that may wait for a worker.", length},
		{"codeagent_exec_queue_waiting", "Executions waiting for a worker now.", waiting},
	} {
		Header(w, g.name, "gauge", g.help)
		fmt.Fprintf(w, "%s %d\n", g.name, g.v)
	}
	writePoolMetrics(w, e.backend)
}

// writePoolMetrics writes the state of the pools of sandboxes the backend
// keeps started ahead (sandbox.Pools), when it keeps any.
func writePoolMetrics(w io.Writer, sb sandbox.Sandbox) {
	var pools []sandbox.PoolStats
	for sb != nil {
		if p, ok := sb.(sandbox.Pools); ok {
			pools = p.PoolStats()
			break
		}
		u, ok := sb.(interface{ Unwrap() sandbox.Sandbox })
		if !ok {
			break
		}
		sb = u.Unwrap()
	}
	if len(pools) == 0 {
		return
	}
	for _, m := range []struct {
		name, typ, help string
		v               func(p sandbox.PoolStats) string
	}{
		{"codeagent_pool_size", "gauge", "The most sandboxes a pool keeps started ahead (pool: sandbox, python).", func(p sandbox.PoolStats) string { return strconv.Itoa(p.Size) }},
		{"codeagent_pool_target", "gauge", "What a pool keeps ready now, for the recent demand.", func(p sandbox.PoolStats) string { return strconv.Itoa(p.Target) }},
		{"codeagent_pool_ready", "gauge", "Sandboxes ready in a pool.", func(p sandbox.PoolStats) string { return strconv.Itoa(p.Ready) }},
		{"codeagent_pool_starting", "gauge", "Sandboxes a pool is starting.", func(p sandbox.PoolStats) string { return strconv.Itoa(p.Starting) }},
		{"codeagent_pool_hits_total", "counter", "Executions that found a sandbox of the pool ready.", func(p sandbox.PoolStats) string { return strconv.FormatUint(p.Hits, 10) }},
		{"codeagent_pool_misses_total", "counter", "Executions that found none and started one on demand (or ran cold).", func(p sandbox.PoolStats) string { return strconv.FormatUint(p.Misses, 10) }},
		{"codeagent_pool_refills_total", "counter", "Sandboxes a pool started ahead.", func(p sandbox.PoolStats) string { return strconv.FormatUint(p.Refills, 10) }},
		{"codeagent_pool_refill_cpu_seconds_total", "counter", "CPU time the sandboxes of a pool used to start, where measured.", func(p sandbox.PoolStats) string { return fmtFloat(p.RefillCPU.Seconds()) }},
	} {
		Header(w, m.name, m.typ, m.help)
		for _, p := range pools {
			fmt.Fprintf(w, "%s{pool=%q} %s\n", m.name, p.Pool, m.v(p))
		}
	}
}

// Header writes a metric's HELP and TYPE lines.
func Header(w io.Writer, name, typ, help string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
