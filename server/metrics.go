package server

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
)

// durationBuckets are the upper bounds, in seconds, of the execution
// duration histogram.
var durationBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

type histogram struct {
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
	n      uint64
}

// Metrics are the server's counters, rendered in the Prometheus text
// format by ServeHTTP-like writeTo.
type Metrics struct {
	mu           sync.Mutex
	executions   map[[2]string]uint64 // {source, status}
	durations    map[string]*histogram
	rejected     uint64
	runs         map[string]uint64 // outcome
	tokens       map[string]uint64 // input, output
	modelReqs    uint64
	httpRequests map[string]uint64 // status code
}

func newMetrics() *Metrics {
	return &Metrics{executions: map[[2]string]uint64{}, durations: map[string]*histogram{},
		runs: map[string]uint64{}, tokens: map[string]uint64{}, httpRequests: map[string]uint64{}}
}

func (m *Metrics) execution(source, status string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.executions[[2]string{source, status}]++
	h := m.durations[source]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(durationBuckets)+1)}
		m.durations[source] = h
	}
	sec := d.Seconds()
	i := sort.SearchFloat64s(durationBuckets, sec)
	h.counts[i]++
	h.sum += sec
	h.n++
}

func (m *Metrics) rejectedExec() { m.mu.Lock(); m.rejected++; m.mu.Unlock() }

func (m *Metrics) run(outcome string, requests int, in, out int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs[outcome]++
	m.modelReqs += uint64(requests)
	m.tokens["input"] += uint64(in)
	m.tokens["output"] += uint64(out)
}

func (m *Metrics) request(status int) {
	m.mu.Lock()
	m.httpRequests[strconv.Itoa(status)]++
	m.mu.Unlock()
}

func header(w io.Writer, name, typ, help string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// handleMetrics serves the metrics in the Prometheus text format 0.0.4.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m := s.metrics
	workers, busy, length, waiting := s.queue.Stats()
	active := s.runs.active()
	m.mu.Lock()
	defer m.mu.Unlock()

	header(w, "codeagent_executions_total", "counter", "Executions in the sandbox by source (exec, run) and status.")
	keys := make([][2]string, 0, len(m.executions))
	for k := range m.executions {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		fmt.Fprintf(w, "codeagent_executions_total{source=%q,status=%q} %d\n", k[0], k[1], m.executions[k])
	}
	header(w, "codeagent_execution_duration_seconds", "histogram", "Wall time of executions, queue wait excluded.")
	for _, src := range sortedKeys(m.durations) {
		h := m.durations[src]
		var cum uint64
		for i, le := range durationBuckets {
			cum += h.counts[i]
			fmt.Fprintf(w, "codeagent_execution_duration_seconds_bucket{source=%q,le=%q} %d\n", src, fmtFloat(le), cum)
		}
		fmt.Fprintf(w, "codeagent_execution_duration_seconds_bucket{source=%q,le=\"+Inf\"} %d\n", src, h.n)
		fmt.Fprintf(w, "codeagent_execution_duration_seconds_sum{source=%q} %s\n", src, fmtFloat(h.sum))
		fmt.Fprintf(w, "codeagent_execution_duration_seconds_count{source=%q} %d\n", src, h.n)
	}
	header(w, "codeagent_executions_rejected_total", "counter", "Executions refused because the queue was full.")
	fmt.Fprintf(w, "codeagent_executions_rejected_total %d\n", m.rejected)
	gauges := []struct {
		name, help string
		v          int
	}{
		{"codeagent_exec_workers", "Executions that may run at once.", workers},
		{"codeagent_exec_workers_busy", "Executions running now.", busy},
		{"codeagent_exec_queue_capacity", "Executions that may wait for a worker.", length},
		{"codeagent_exec_queue_waiting", "Executions waiting for a worker now.", waiting},
		{"codeagent_sandbox_pool_size", "Sandboxes the backend keeps started ahead.", s.cfg.Warm},
		{"codeagent_runs_active", "Agent runs under way.", active},
	}
	for _, g := range gauges {
		header(w, g.name, "gauge", g.help)
		fmt.Fprintf(w, "%s %d\n", g.name, g.v)
	}
	s.writeKernelMetrics(w)
	header(w, "codeagent_runs_total", "counter", "Finished agent runs by outcome.")
	for _, k := range sortedKeys(m.runs) {
		fmt.Fprintf(w, "codeagent_runs_total{outcome=%q} %d\n", k, m.runs[k])
	}
	header(w, "codeagent_model_requests_total", "counter", "Requests to the model, retries included.")
	fmt.Fprintf(w, "codeagent_model_requests_total %d\n", m.modelReqs)
	header(w, "codeagent_model_tokens_total", "counter", "Model tokens by direction.")
	for _, d := range []string{"input", "output"} {
		fmt.Fprintf(w, "codeagent_model_tokens_total{direction=%q} %d\n", d, m.tokens[d])
	}
	header(w, "codeagent_http_requests_total", "counter", "HTTP requests by status code.")
	for _, k := range sortedKeys(m.httpRequests) {
		fmt.Fprintf(w, "codeagent_http_requests_total{code=%q} %d\n", k, m.httpRequests[k])
	}
}
