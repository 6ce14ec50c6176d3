package app

import (
	"fmt"
	"runtime"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// MinLimits are the least any door lets a request or flag ask for: below
// them the sandbox cannot start a program at all (bubblewrap's init and
// the program need processes, an interpreter needs memory and
// descriptors), which would be a setup error rather than the caller's
// mistake.
var MinLimits = sandbox.Limits{WallTime: 10 * time.Millisecond, CPUTime: 10 * time.Millisecond, Memory: 16 << 20,
	Processes: 4, Output: 1, FileSize: 4 << 10, Disk: 1 << 20, OpenFiles: 16, CPUs: 0.01}

// CheckMin refuses a limit that l sets (non-zero) below MinLimits, as an
// error of class ErrInvalid naming the field as the Limits JSON and the
// HTTP API do (limits.timeout, limits.memory, ...).
func CheckMin(l sandbox.Limits) error {
	for _, f := range []struct {
		name     string
		set, min bool
		v, least string
	}{
		{"timeout", l.WallTime != 0, l.WallTime < MinLimits.WallTime, l.WallTime.String(), MinLimits.WallTime.String()},
		{"cpu_time", l.CPUTime != 0, l.CPUTime < MinLimits.CPUTime, l.CPUTime.String(), MinLimits.CPUTime.String()},
		{"memory", l.Memory != 0, l.Memory < MinLimits.Memory, sandbox.FormatSize(l.Memory), sandbox.FormatSize(MinLimits.Memory)},
		{"processes", l.Processes != 0, l.Processes < MinLimits.Processes, fmt.Sprint(l.Processes), fmt.Sprint(MinLimits.Processes)},
		{"output", l.Output != 0, l.Output < MinLimits.Output, sandbox.FormatSize(l.Output), sandbox.FormatSize(MinLimits.Output)},
		{"file_size", l.FileSize != 0, l.FileSize < MinLimits.FileSize, sandbox.FormatSize(l.FileSize), sandbox.FormatSize(MinLimits.FileSize)},
		{"disk", l.Disk != 0, l.Disk < MinLimits.Disk, sandbox.FormatSize(l.Disk), sandbox.FormatSize(MinLimits.Disk)},
		{"open_files", l.OpenFiles != 0, l.OpenFiles < MinLimits.OpenFiles, fmt.Sprint(l.OpenFiles), fmt.Sprint(MinLimits.OpenFiles)},
		{"cpus", l.CPUs != 0, l.CPUs < MinLimits.CPUs, fmt.Sprint(l.CPUs), fmt.Sprint(MinLimits.CPUs)},
	} {
		if f.set && f.min {
			return invalidf("limits.%s: %s is below the least a program can start with, %s", f.name, f.v, f.least)
		}
	}
	return nil
}

// MaxLimits are the default ceilings of what one request to a server may
// ask for, at every door that takes limits from a client (the HTTP API's
// /v1/exec, MCP's execute_code); each server may lower or raise them
// (serve's ExecMaxLimits, MCP's Config.MaxLimits).
func MaxLimits() sandbox.Limits {
	return sandbox.Limits{WallTime: 60 * time.Second, CPUTime: 60 * time.Second, Memory: 1 << 30, Processes: 256,
		Output: 4 << 20, FileSize: 100 << 20, Disk: 500 << 20, OpenFiles: 1024, CPUs: float64(runtime.NumCPU())}
}
