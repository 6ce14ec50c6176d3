package sandbox

import "testing"

func TestWithThreadEnv(t *testing.T) {
	for _, c := range []struct {
		cpus float64
		want string
	}{{0, "1"}, {0.5, "1"}, {1, "1"}, {1.5, "2"}, {4, "4"}, {12, "12"}, {1024, "1024"}} {
		env := WithThreadEnv(nil, c.cpus)
		for _, k := range ThreadVars {
			if env[k] != c.want {
				t.Errorf("%g CPUs: %s=%q, want %q", c.cpus, k, env[k], c.want)
			}
		}
	}
	mine := map[string]string{"OMP_NUM_THREADS": "8", "X": "y"}
	env := WithThreadEnv(mine, 1)
	if env["OMP_NUM_THREADS"] != "8" || env["X"] != "y" || env["OPENBLAS_NUM_THREADS"] != "1" {
		t.Errorf("the program's own settings must win: %v", env)
	}
	if len(mine) != 2 {
		t.Errorf("the spec's map was changed: %v", mine)
	}
}
