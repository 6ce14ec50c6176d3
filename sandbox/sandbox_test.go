package sandbox

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestVerdict(t *testing.T) {
	lim := DefaultLimits().WithDefaults()
	cases := []struct {
		name      string
		killed    KillReason
		oom       bool
		code      int
		status    Status
		signal    int
		exit      int
		inMessage string
	}{
		{"ok", NotKilled, false, 0, StatusOK, 0, 0, ""},
		{"error", NotKilled, false, 3, StatusError, 0, 3, ""},
		{"segfault", NotKilled, false, 139, StatusSignaled, 11, 139, "SIGSEGV"},
		{"cpu limit", NotKilled, false, 128 + 24, StatusTimeout, 24, 124, "CPU-time"},
		{"timeout wins over its SIGKILL", KilledTimeout, false, 137, StatusTimeout, 9, 124, "wall-clock"},
		{"memory", NotKilled, true, 137, StatusMemoryLimit, 9, 137, "256 MiB"},
		{"disk", KilledDisk, false, 137, StatusSignaled, 25, 153, "disk limit"},
		{"cancel", KilledCancel, false, 137, StatusSignaled, 9, 137, "cancelled"},
		{"abnormal", NotKilled, false, -1, StatusSignaled, 0, 137, "abnormally"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r Result
			Verdict(&r, lim, tc.killed, tc.oom, tc.code)
			if r.Status != tc.status || r.Signal != tc.signal || r.ExitStatus() != tc.exit {
				t.Fatalf("got %s signal %d exit %d, want %s %d %d", r.Status, r.Signal, r.ExitStatus(), tc.status, tc.signal, tc.exit)
			}
			if tc.inMessage != "" && !strings.Contains(r.Message, tc.inMessage) {
				t.Fatalf("message %q lacks %q", r.Message, tc.inMessage)
			}
		})
	}
}

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

func TestCheckHostUID(t *testing.T) {
	if err := CheckHostUID(DefaultHostUID); err != nil {
		t.Fatalf("the default host uid is taken on this host: %v", err)
	}
	if err := CheckHostUID(0); err == nil {
		t.Fatal("uid 0 accepted")
	}
	if err := CheckHostUID(65534); err == nil && fileHas("/etc/passwd", ":65534:") {
		t.Fatal("nobody's uid accepted")
	}
}

func fileHas(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

func TestCheckHostUIDRange(t *testing.T) {
	if err := CheckHostUIDRange(DefaultHostUID, HostUIDCount); err != nil {
		t.Fatalf("the default host uid range is taken on this host: %v", err)
	}
	if err := CheckHostUIDRange(65000, 1000); err == nil && fileHas("/etc/passwd", ":65534:") {
		t.Fatal("a range holding nobody's uid accepted")
	}
	if err := CheckHostUIDRange(1<<32-10, 100); err == nil {
		t.Fatal("a range past the last uid accepted")
	}
}
