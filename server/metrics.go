package server

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"

	"github.com/codeagent/codeagent/app"
)

// Metrics are the server's own counters (runs, model use, HTTP requests);
// the executions' are app.Executions'. handleMetrics renders both in the
// Prometheus text format.
type Metrics struct {
	mu           sync.Mutex
	runs         map[string]uint64 // outcome
	tokens       map[string]uint64 // input, output
	modelReqs    uint64
	httpRequests map[string]uint64 // status code
}

func newMetrics() *Metrics {
	return &Metrics{runs: map[string]uint64{}, tokens: map[string]uint64{}, httpRequests: map[string]uint64{}}
}

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

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// handleMetrics serves the metrics in the Prometheus text format 0.0.4.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	m := s.metrics
	// The executions' counters and queue, shared with MCP (app.Executions).
	s.executions.WriteMetrics(w)
	active := s.runs.active()
	m.mu.Lock()
	defer m.mu.Unlock()
	gauges := []struct {
		name, help string
		v          int
	}{
		{"codeagent_runs_active", "Agent runs under way.", active},
	}
	for _, g := range gauges {
		app.Header(w, g.name, "gauge", g.help)
		fmt.Fprintf(w, "%s %d\n", g.name, g.v)
	}
	s.writeKernelMetrics(w)
	app.Header(w, "codeagent_runs_total", "counter", "Finished agent runs by outcome.")
	for _, k := range sortedKeys(m.runs) {
		fmt.Fprintf(w, "codeagent_runs_total{outcome=%q} %d\n", k, m.runs[k])
	}
	app.Header(w, "codeagent_model_requests_total", "counter", "Requests to the model, retries included.")
	fmt.Fprintf(w, "codeagent_model_requests_total %d\n", m.modelReqs)
	app.Header(w, "codeagent_model_tokens_total", "counter", "Model tokens by direction.")
	for _, d := range []string{"input", "output"} {
		fmt.Fprintf(w, "codeagent_model_tokens_total{direction=%q} %d\n", d, m.tokens[d])
	}
	app.Header(w, "codeagent_http_requests_total", "counter", "HTTP requests by status code.")
	for _, k := range sortedKeys(m.httpRequests) {
		fmt.Fprintf(w, "codeagent_http_requests_total{code=%q} %d\n", k, m.httpRequests[k])
	}
}
