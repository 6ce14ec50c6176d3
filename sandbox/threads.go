package sandbox

import (
	"math"
	"strconv"
)

// ThreadVars name the thread-pool sizes that numerical libraries read
// when they start (OpenMP, OpenBLAS, MKL, numexpr, Accelerate), and Go's
// GOMAXPROCS: Go 1.19 sizes it by the host's CPUs, not the CPU limit, and
// go run's go, compile and link then start threads enough to hit the
// process limit (64) from 16 host CPUs on ("fatal error: newosproc").
var ThreadVars = []string{"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "GOMAXPROCS"}

// WithThreadEnv returns env with each of ThreadVars that env does not set
// set to cpus rounded up (at least 1). Left alone, those libraries start a
// thread per host CPU, and threads that spin waiting for work under a CPU
// quota are throttled: `import pandas, matplotlib.pyplot` took 120 ms
// (16%) longer at 1 CPU on a 2-CPU host. env itself is not changed.
func WithThreadEnv(env map[string]string, cpus float64) map[string]string {
	n := "1"
	if c := math.Ceil(cpus); c > 1 && c <= MaxCPUs {
		n = strconv.Itoa(int(c))
	}
	out := make(map[string]string, len(env)+len(ThreadVars))
	for _, k := range ThreadVars {
		out[k] = n
	}
	for k, v := range env {
		out[k] = v
	}
	return out
}
