package sandbox

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Limits bound one execution. A zero field means "use the default".
type Limits struct {
	// WallTime is the wall-clock budget; the sandbox is killed when it runs out.
	WallTime time.Duration
	// CPUTime is the CPU-time budget of each process (RLIMIT_CPU).
	CPUTime time.Duration
	// Memory caps the memory of all processes together, in bytes.
	Memory int64
	// Processes caps the number of processes and threads.
	Processes int
	// Output caps each of stdout and stderr, in bytes; the rest is discarded
	// (and the result flagged) while the program keeps running.
	Output int64
	// FileSize caps each file the program writes (RLIMIT_FSIZE), in bytes.
	FileSize int64
	// Disk caps the growth of the workspace and the size of /tmp, in bytes.
	Disk int64
	// OpenFiles caps open file descriptors per process.
	OpenFiles int
	// CPUs caps the CPU bandwidth of all processes together, in cores
	// (1.5 = one and a half cores), enforced by the kernel's CFS quota.
	CPUs float64
}

// DefaultLimits are used for every zero field of a Spec's Limits.
func DefaultLimits() Limits {
	return Limits{
		WallTime:  30 * time.Second,
		CPUTime:   0, // follows WallTime
		Memory:    256 << 20,
		Processes: 64,
		Output:    1 << 20,
		FileSize:  100 << 20,
		Disk:      100 << 20,
		OpenFiles: 256,
		CPUs:      1,
	}
}

// WithDefaults returns l with every zero field set from DefaultLimits. CPU
// time defaults to the wall time: a single process cannot use more.
func (l Limits) WithDefaults() Limits {
	l = DefaultLimits().Overlay(l)
	if l.CPUTime <= 0 {
		l.CPUTime = l.WallTime
	}
	return l
}

// Overlay returns l with every non-zero field of o set over it: the layer
// of explicit settings (flags) over a base (defaults, a manifest).
func (l Limits) Overlay(o Limits) Limits {
	over(&l.WallTime, o.WallTime)
	over(&l.CPUTime, o.CPUTime)
	over(&l.Memory, o.Memory)
	over(&l.Processes, o.Processes)
	over(&l.Output, o.Output)
	over(&l.FileSize, o.FileSize)
	over(&l.Disk, o.Disk)
	over(&l.OpenFiles, o.OpenFiles)
	over(&l.CPUs, o.CPUs)
	return l
}

// over sets *dst to v when v is set (positive).
func over[T int | int64 | float64 | time.Duration](dst *T, v T) {
	if v > 0 {
		*dst = v
	}
}

// ParseSize reads a byte size such as "256MiB", "1GB", "100m" or "4096".
// Decimal units (KB, MB, GB) are powers of 1000, binary ones (KiB, MiB, GiB)
// and single letters (k, m, g) powers of 1024.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty size")
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("invalid size %q: want a number with an optional unit such as 256MiB", s)
	}
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
		"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
		"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
		"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
	}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q", s, t[i:])
	}
	v := f * mult
	if v > 1<<62 {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return int64(v), nil
}

// FormatSize renders n bytes for people, e.g. "256 MiB".
func FormatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + string("KMGTPE"[exp]) + "iB"
}

// MaxCPUs is the largest CPUs limit accepted anywhere.
const MaxCPUs = 1024

// ParseCPUs reads a CPU limit such as "1", "0.5" or "2.5" cores.
func ParseCPUs(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f != f || f <= 0 || f > MaxCPUs {
		return 0, fmt.Errorf("invalid CPU limit %q: want a number of cores between 0.01 and %d, e.g. 1.5", s, MaxCPUs)
	}
	if f < 0.01 {
		return 0, fmt.Errorf("invalid CPU limit %q: at least 0.01 cores", s)
	}
	return f, nil
}
