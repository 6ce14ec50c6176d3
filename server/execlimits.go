package server

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// limitKind is how a field of "limits" is written.
type limitKind int

const (
	kindDuration limitKind = iota // "10s", or whole milliseconds
	kindSize                      // "256MiB", or bytes
	kindCount                     // a whole number
	kindCores                     // a number of cores
)

type limitField struct {
	name string
	kind limitKind
	// get and set address the field in a sandbox.Limits, as a float64 of
	// the field's unit (nanoseconds, bytes, a count, cores).
	get func(sandbox.Limits) float64
	set func(*sandbox.Limits, float64)
}

var limitFields = []limitField{
	{"timeout", kindDuration, func(l sandbox.Limits) float64 { return float64(l.WallTime) }, func(l *sandbox.Limits, v float64) { l.WallTime = time.Duration(v) }},
	{"cpu_time", kindDuration, func(l sandbox.Limits) float64 { return float64(l.CPUTime) }, func(l *sandbox.Limits, v float64) { l.CPUTime = time.Duration(v) }},
	{"memory", kindSize, func(l sandbox.Limits) float64 { return float64(l.Memory) }, func(l *sandbox.Limits, v float64) { l.Memory = int64(v) }},
	{"processes", kindCount, func(l sandbox.Limits) float64 { return float64(l.Processes) }, func(l *sandbox.Limits, v float64) { l.Processes = int(v) }},
	{"output", kindSize, func(l sandbox.Limits) float64 { return float64(l.Output) }, func(l *sandbox.Limits, v float64) { l.Output = int64(v) }},
	{"file_size", kindSize, func(l sandbox.Limits) float64 { return float64(l.FileSize) }, func(l *sandbox.Limits, v float64) { l.FileSize = int64(v) }},
	{"disk", kindSize, func(l sandbox.Limits) float64 { return float64(l.Disk) }, func(l *sandbox.Limits, v float64) { l.Disk = int64(v) }},
	{"open_files", kindCount, func(l sandbox.Limits) float64 { return float64(l.OpenFiles) }, func(l *sandbox.Limits, v float64) { l.OpenFiles = int(v) }},
	{"cpus", kindCores, func(l sandbox.Limits) float64 { return l.CPUs }, func(l *sandbox.Limits, v float64) { l.CPUs = v }},
}

// limits reads the request's "limits": each field at most the server's
// ExecMaxLimits, or a 400 naming the field; the fields the request left
// out (or set to 0) are zero. The least a program can start with is the
// request's own rule (app.Program.Validate, app.CellRequest.Validate).
func (s *Server) limits(raw map[string]json.RawMessage) (sandbox.Limits, error) {
	var req sandbox.Limits
	known := map[string]bool{}
	for _, f := range limitFields {
		known[f.name] = true
		b, ok := raw[f.name]
		if !ok || string(b) == "null" {
			continue
		}
		v, err := parseLimit(f.kind, b)
		if err != nil {
			return req, badRequest("limits.%s: %v", f.name, err)
		}
		if v == 0 {
			continue // the default
		}
		if hi := f.get(s.cfg.ExecMaxLimits); v > hi {
			return req, badRequest("limits.%s: %s is over this server's maximum of %s", f.name, show(f.kind, v), show(f.kind, hi))
		}
		f.set(&req, v)
	}
	var unknown []string
	for k := range raw {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return req, badRequest("limits.%s: unknown limit (known: timeout, cpu_time, memory, processes, output, file_size, disk, open_files, cpus)", unknown[0])
	}
	return req, nil
}

// parseLimit reads one value in the field's unit; 0 means the default.
func parseLimit(kind limitKind, b json.RawMessage) (float64, error) {
	var str string
	if json.Unmarshal(b, &str) == nil {
		switch kind {
		case kindDuration:
			d, err := time.ParseDuration(str)
			if err != nil || d < 0 {
				return 0, fmt.Errorf("%q is not a duration such as \"10s\" or \"500ms\"", str)
			}
			return float64(d), nil
		case kindSize:
			n, err := sandbox.ParseSize(str)
			if err != nil || n < 0 {
				return 0, fmt.Errorf("%q is not a size such as \"256MiB\"", str)
			}
			return float64(n), nil
		}
		return 0, fmt.Errorf("%q: want a number", str)
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return 0, fmt.Errorf("%s: want a number or a string", b)
	}
	v, err := n.Float64()
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("%s: want a number, 0 or more", n)
	}
	if kind != kindCores && v != math.Trunc(v) {
		return 0, fmt.Errorf("%s: want a whole number", n)
	}
	if kind == kindDuration {
		v *= float64(time.Millisecond)
	}
	if v >= math.MaxInt64/2 {
		return math.Inf(1), nil // over any maximum, said as such
	}
	return v, nil
}

// show writes a value of the field's unit for a message.
func show(kind limitKind, v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "the value"
	case kind == kindDuration:
		return fmt.Sprintf("%d ms (%s)", int64(v)/int64(time.Millisecond), time.Duration(v))
	case kind == kindSize:
		return sandbox.FormatSize(int64(v))
	case kind == kindCores:
		return strings.TrimSuffix(fmt.Sprintf("%g", v), ".0")
	}
	return fmt.Sprintf("%d", int64(v))
}
