package warm

import (
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/sandbox"
)

// environ is a backend's complete environment: its defaults under env.
func environ(env map[string]string) []string {
	all := map[string]string{"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", "TMPDIR": "/tmp"}
	for k, v := range env {
		all[k] = v
	}
	var out []string
	for k, v := range all {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

type gateway struct{ sandbox.Gateway }

func TestArgs(t *testing.T) {
	lim := sandbox.DefaultLimits()
	with := func(env map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range Env() {
			out[k] = v
		}
		for k, v := range env {
			out[k] = v
		}
		return out
	}
	code := []sandbox.File{{Path: "/code/main.py", Data: []byte("print(1)")}}
	cases := []struct {
		name string
		spec sandbox.Spec
		lim  func(*sandbox.Limits)
		want []string // nil: runs cold
	}{
		{name: "File", spec: sandbox.Spec{Command: []string{"python3", "/code/main.py", "a"}, Files: code}, want: []string{"/code/main.py", "a"}},
		{name: "WorkspaceFile", spec: sandbox.Spec{Command: []string{"python3", "/workspace/x.py"}}, want: []string{"/workspace/x.py"}},
		{name: "Module", spec: sandbox.Spec{Command: []string{"python3", "-m", "pkg.main", "x"}}, want: []string{"-m", "pkg.main", "x"}},
		{name: "Code", spec: sandbox.Spec{Command: []string{"python3", "-c", "print(1)"}}, want: []string{"-c", "print(1)"}},
		{name: "OtherEnvironment", spec: sandbox.Spec{Command: []string{"python3", "-c", "1"}, Env: with(map[string]string{"GREETING": "hi"})}, want: []string{"-c", "1"}},
		{name: "ImportsTheStack", spec: sandbox.Spec{Command: []string{"python3", "/code/main.py"}, Files: code, Imports: []string{"json", "pandas"}}, want: []string{"/code/main.py"}},
		{name: "ImportsALocalModule", spec: sandbox.Spec{Command: []string{"python3", "/code/main.py"}, Files: code, Imports: []string{"helpers"}}, want: []string{"/code/main.py"}},
		{name: "ImportsUnknown", spec: sandbox.Spec{Command: []string{"python3", "/code/main.py"}, Files: code, Imports: nil}, want: []string{"/code/main.py"}},
		{name: "ImportsOnlyTheStandardLibrary", spec: sandbox.Spec{Command: []string{"python3", "/code/main.py"}, Files: code, Imports: []string{"json", "os"}}},
		{name: "ImportsNothing", spec: sandbox.Spec{Command: []string{"python3", "/code/main.py"}, Files: code, Imports: []string{}}},
		{name: "ModuleWithoutName", spec: sandbox.Spec{Command: []string{"python3", "-m"}}},
		{name: "CodeWithoutCode", spec: sandbox.Spec{Command: []string{"python3", "-c"}}},
		{name: "Interactive", spec: sandbox.Spec{Command: []string{"python3"}}},
		{name: "RelativeFile", spec: sandbox.Spec{Command: []string{"python3", "main.py"}}},
		{name: "Option", spec: sandbox.Spec{Command: []string{"python3", "-u", "/code/main.py"}}},
		{name: "OtherInterpreter", spec: sandbox.Spec{Command: []string{"python3.12", "/code/main.py"}}},
		{name: "Shell", spec: sandbox.Spec{Command: []string{"sh", "-c", "python3 /code/main.py"}}},
		{name: "FileOutsideCode", spec: sandbox.Spec{Command: []string{"python3", "/code/main.py"}, Files: []sandbox.File{{Path: "/opt/x"}}}},
		{name: "LoaderPath", spec: sandbox.Spec{Command: []string{"python3", "/code/main.py"}, Files: []sandbox.File{{Path: loaderPath}}}},
		{name: "Network", spec: sandbox.Spec{Command: []string{"python3", "-c", "1"}, Network: &sandbox.Network{}}},
		{name: "Gateway", spec: sandbox.Spec{Command: []string{"python3", "-c", "1"}, Gateway: gateway{}}},
		{name: "SmallMemory", spec: sandbox.Spec{Command: []string{"python3", "-c", "1"}}, lim: func(l *sandbox.Limits) { l.Memory = minMemory - 1 }},
		{name: "EnoughMemory", spec: sandbox.Spec{Command: []string{"python3", "-c", "1"}}, lim: func(l *sandbox.Limits) { l.Memory = minMemory }, want: []string{"-c", "1"}},
		{name: "FewProcesses", spec: sandbox.Spec{Command: []string{"python3", "-c", "1"}}, lim: func(l *sandbox.Limits) { l.Processes = minProcs - 1 }},
		{name: "StartupVariable", spec: sandbox.Spec{Command: []string{"python3", "-c", "1"}, Env: with(map[string]string{"PYTHONHASHSEED": "1"})}},
		{name: "OtherHome", spec: sandbox.Spec{Command: []string{"python3", "-c", "1"}, Env: with(map[string]string{"HOME": "/workspace"})}},
		{name: "OtherThreads", spec: sandbox.Spec{Command: []string{"python3", "-c", "1"}, Env: with(map[string]string{"OMP_NUM_THREADS": "8"})}},
		{name: "MatplotlibBackend", spec: sandbox.Spec{Command: []string{"python3", "-c", "1"}, Env: with(map[string]string{"MPLBACKEND": "svg"})}},
		{name: "NotPythonsEnvironment", spec: sandbox.Spec{Command: []string{"python3", "-c", "1"}, Env: map[string]string{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.spec.Env == nil {
				tc.spec.Env = Env() // a Python program's, as lang gives it
			}
			l := lim
			if tc.lim != nil {
				tc.lim(&l)
			}
			got, ok := Args(tc.spec, l, environ)
			if ok != (tc.want != nil) || strings.Join(got, "\x00") != strings.Join(tc.want, "\x00") {
				t.Fatalf("Args = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

func TestStartupVar(t *testing.T) {
	for _, k := range []string{"PYTHONPATH", "LC_ALL", "LANG", "HOME", "PATH", "TZ", "MPLCONFIGDIR", "OPENBLAS_NUM_THREADS",
		"OMP_NUM_THREADS", "XDG_CACHE_HOME", "LD_PRELOAD", "MALLOC_ARENA_MAX", "GLIBC_TUNABLES", "NUMPY_EXPERIMENTAL"} {
		if !startupVar(k) {
			t.Errorf("%s is not a startup variable", k)
		}
	}
	for _, k := range []string{"GREETING", "MODE", "USER", "DATA_DIR"} {
		if startupVar(k) {
			t.Errorf("%s is a startup variable", k)
		}
	}
}

func TestLeavesRoom(t *testing.T) {
	if !LeavesRoom(90<<20, 256<<20) || !LeavesRoom(192<<20, 256<<20) || LeavesRoom(192<<20+1, 256<<20) {
		t.Fatal("the interpreter may hold up to three quarters of the memory limit")
	}
}

// TestStdlibIsThePythonOfTheSandbox: the list Helps reads is the standard
// library of the python3 the sandbox runs, when that is the Python it was
// taken from.
func TestStdlibIsThePythonOfTheSandbox(t *testing.T) {
	out, err := exec.Command("/usr/bin/python3", "-c", "import sys; print(sys.version_info[:2] == (3, 11)); print(' '.join(sorted(sys.stdlib_module_names)))").Output()
	if err != nil {
		t.Skip("no /usr/bin/python3:", err)
	}
	first, rest, _ := strings.Cut(string(out), "\n")
	if first != "True" {
		t.Skip("/usr/bin/python3 is not Python 3.11: regenerate stdlib.txt from it")
	}
	if got, want := strings.Fields(stdlibText), strings.Fields(rest); !slices.Equal(got, want) {
		t.Errorf("stdlib.txt differs from /usr/bin/python3's sys.stdlib_module_names (%d names, want %d)", len(got), len(want))
	}
}
