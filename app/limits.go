package app

import (
	"runtime"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// MaxLimits are the default ceilings of what one request to a server may
// ask for, at every door that takes limits from a client (the HTTP API's
// /v1/exec, MCP's execute_code); each server may lower or raise them
// (serve's ExecMaxLimits, MCP's Config.MaxLimits).
func MaxLimits() sandbox.Limits {
	return sandbox.Limits{WallTime: 60 * time.Second, CPUTime: 60 * time.Second, Memory: 1 << 30, Processes: 256,
		Output: 4 << 20, FileSize: 100 << 20, Disk: 500 << 20, OpenFiles: 1024, CPUs: float64(runtime.NumCPU())}
}
