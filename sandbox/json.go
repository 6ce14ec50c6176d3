package sandbox

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// ResultJSON is the stable JSON form of a Result, as printed by
// `codeagent exec --json` and returned by the HTTP API. Output that is not
// valid UTF-8 appears lossily in stdout/stderr and exactly in
// stdout_base64/stderr_base64.
type ResultJSON struct {
	Status          string `json:"status"`
	ExitCode        int    `json:"exit_code"`
	Signal          string `json:"signal"`
	Message         string `json:"message,omitempty"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutBase64    string `json:"stdout_base64,omitempty"`
	StderrBase64    string `json:"stderr_base64,omitempty"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	WallMS          int64  `json:"wall_ms"`
	CPUMS           int64  `json:"cpu_ms"`
	PeakMemoryBytes int64  `json:"peak_memory_bytes"`
	// Egress is present when the execution had a network (see Network).
	Egress *EgressJSON `json:"egress,omitempty"`
	// WeakIsolation is present when the program ran with weaker isolation
	// than required, accepted by the caller (Result.WeakIsolation).
	WeakIsolation []string `json:"weak_isolation,omitempty"`
}

// JSON returns the JSON form of r.
func (r Result) JSON() ResultJSON {
	j := ResultJSON{
		Status:          r.Status.String(),
		ExitCode:        r.ExitStatus(),
		Signal:          SignalName(r.Signal),
		Message:         r.Message,
		Stdout:          string(r.Stdout),
		Stderr:          string(r.Stderr),
		StdoutTruncated: r.StdoutTruncated,
		StderrTruncated: r.StderrTruncated,
		WallMS:          r.WallTime.Milliseconds(),
		CPUMS:           r.CPUTime.Milliseconds(),
		PeakMemoryBytes: r.PeakMemory,
		Egress:          r.Egress.JSON(),
		WeakIsolation:   r.WeakIsolation,
	}
	if !utf8.Valid(r.Stdout) {
		j.StdoutBase64 = base64.StdEncoding.EncodeToString(r.Stdout)
	}
	if !utf8.Valid(r.Stderr) {
		j.StderrBase64 = base64.StdEncoding.EncodeToString(r.Stderr)
	}
	return j
}

// SignalName returns the conventional name of signal n ("SIGKILL"), or ""
// for 0.
func SignalName(n int) string {
	if n <= 0 {
		return ""
	}
	if name := unix.SignalName(unix.Signal(n)); name != "" {
		return name
	}
	return "SIG" + strconv.Itoa(n)
}
