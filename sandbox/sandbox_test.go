package sandbox

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "256MiB": 256 << 20, "1GB": 1e9, "100m": 100 << 20, "1.5k": 1536, " 2 GiB ": 2 << 30} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "-1MB", "5 parsecs", "1e30GB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	if FormatSize(256<<20) != "256 MiB" || FormatSize(1536) != "1.5 KiB" || FormatSize(12) != "12 B" {
		t.Errorf("FormatSize: %s %s %s", FormatSize(256<<20), FormatSize(1536), FormatSize(12))
	}
}

func TestLimitsLayers(t *testing.T) {
	l := Limits{WallTime: 5 * time.Second}.WithDefaults()
	if l.CPUTime != 5*time.Second || l.Memory != DefaultLimits().Memory {
		t.Fatalf("defaults: %+v", l)
	}
	o := l.Overlay(Limits{Memory: 1 << 30})
	if o.Memory != 1<<30 || o.WallTime != 5*time.Second {
		t.Fatalf("overlay: %+v", o)
	}
}

func TestSpecValidate(t *testing.T) {
	ws := t.TempDir()
	ok := Spec{Command: []string{"true"}, Workspace: ws, Files: []File{{Path: "/code/a.py"}}, Env: map[string]string{"K": "v"}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]Spec{
		"no command":    {Workspace: ws},
		"no workspace":  {Command: []string{"true"}},
		"missing dir":   {Command: []string{"true"}, Workspace: ws + "/nope"},
		"relative file": {Command: []string{"true"}, Workspace: ws, Files: []File{{Path: "code/a.py"}}},
		"unclean file":  {Command: []string{"true"}, Workspace: ws, Files: []File{{Path: "/code/../etc/x"}}},
		"bad env name":  {Command: []string{"true"}, Workspace: ws, Env: map[string]string{"A=B": "x"}},
		"NUL in env":    {Command: []string{"true"}, Workspace: ws, Env: map[string]string{"A": "x\x00y"}},
	} {
		if err := s.Validate(); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestResultJSON(t *testing.T) {
	r := Result{Status: StatusSignaled, Signal: 11, Stdout: []byte("ok\n"), Stderr: []byte{0xff, 'x'}, WallTime: 1500 * time.Millisecond}
	b, _ := json.Marshal(r.JSON())
	var m map[string]any
	json.Unmarshal(b, &m)
	if m["status"] != "signaled" || m["signal"] != "SIGSEGV" || m["exit_code"] != float64(139) || m["wall_ms"] != float64(1500) {
		t.Fatalf("%s", b)
	}
	if _, ok := m["stdout_base64"]; ok {
		t.Fatal("valid UTF-8 stdout got a base64 copy")
	}
	if m["stderr_base64"] != "/3g=" {
		t.Fatalf("stderr_base64 %v", m["stderr_base64"])
	}
}

func TestCappedBuffer(t *testing.T) {
	c := &CappedBuffer{Cap: 4}
	n, err := c.Write([]byte("abcdef"))
	if n != 6 || err != nil || string(c.Bytes()) != "abcd" || !c.Truncated() || c.Total() != 6 {
		t.Fatalf("%d %v %q %v %d", n, err, c.Bytes(), c.Truncated(), c.Total())
	}
}
