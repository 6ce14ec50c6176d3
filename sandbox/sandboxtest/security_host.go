package sandboxtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/codeagent/codeagent/sandbox"
)

// leakCheck is Python that tries each expression in attempts and prints
// LEAK for every one that succeeds.
func leakCheck(attempts ...string) string {
	var b strings.Builder
	b.WriteString("import os, socket\nok = 0\n")
	for i, a := range attempts {
		fmt.Fprintf(&b, "try:\n    %s\n    print('LEAK %d: ' + %q)\nexcept Exception as e:\n    ok += 1\n", a, i, a)
	}
	fmt.Fprintf(&b, "print('blocked', ok, 'of', %d)\n", len(attempts))
	return b.String()
}

func wantAllBlocked(t *testing.T, res sandbox.Result, n int) {
	t.Helper()
	want := fmt.Sprintf("blocked %d of %d", n, n)
	if bytes.Contains(res.Stdout, []byte("LEAK")) || !bytes.Contains(res.Stdout, []byte(want)) {
		t.Fatalf("attack not contained:\n%s\nstderr: %s", res.Stdout, res.Stderr)
	}
}

func hostFiles(t *testing.T, sb sandbox.Sandbox) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	dotdot := strings.Repeat("../", 12) + strings.TrimPrefix(secret, "/")
	attempts := []string{
		fmt.Sprintf("open(%q).read()", secret),
		fmt.Sprintf("open(%q).read()", dotdot),
		fmt.Sprintf("open('/proc/1/root' + %q).read()", secret),
		fmt.Sprintf("open('/proc/self/root' + %q).read()", secret),
		"open('/etc/shadow').read()",
		"open('/root/.bashrc').read()",
		"os.listdir('/home')",
		fmt.Sprintf("open(%q, 'w').write('owned')", secret),
		fmt.Sprintf("open(%q, 'w').write('owned')", filepath.Join(outside, "new.txt")),
		fmt.Sprintf("open(%q, 'w').write('owned')", dotdot),
		"open('/usr/bin/codeagent-evil', 'w').write('x')",
		"open('/etc/passwd', 'a').write('evil::0:0::/:/bin/sh')",
		"open('/evil', 'w').write('x')",
		"os.symlink('/etc', '/usr/evil')",
	}
	res := execute(t, sb, program{lang: "python", code: leakCheck(attempts...)})
	wantAllBlocked(t, res, len(attempts))
	if got, _ := os.ReadFile(secret); string(got) != "host secret" {
		t.Fatalf("host file changed to %q", got)
	}
	if fileExists(filepath.Join(outside, "new.txt")) || fileExists("/usr/bin/codeagent-evil") || fileExists("/evil") {
		t.Fatalf("a file appeared on the host")
	}
}

func network(t *testing.T, sb sandbox.Sandbox) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := countAccepts(ln)
	port := ln.Addr().(*net.TCPAddr).Port
	attempts := []string{
		fmt.Sprintf("socket.create_connection(('127.0.0.1', %d), timeout=2)", port),
		fmt.Sprintf("socket.create_connection(('localhost', %d), timeout=2)", port),
		"socket.getaddrinfo('example.com', 80)",
		"s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('1.1.1.1', 53)); s.settimeout(1); s.recv(1)",
		// The sandbox's network namespace is not its to configure: no raw
		// sockets, and loopback cannot be taken down (SIOCSIFFLAGS).
		"socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)",
		"import fcntl, struct; fcntl.ioctl(socket.socket(), 0x8914, struct.pack('16sH14x', b'lo', 0))",
	}
	res := execute(t, sb, program{lang: "python", code: leakCheck(attempts...) + "print(sorted(n for _, n in socket.if_nameindex()))\n"})
	wantAllBlocked(t, res, len(attempts))
	if !bytes.Contains(res.Stdout, []byte("['lo']")) && !bytes.Contains(res.Stdout, []byte("[]")) {
		t.Errorf("network interfaces besides loopback: %s", res.Stdout)
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the host listener accepted %d connections from the sandbox", n)
	}
}

func unixSockets(t *testing.T, sb sandbox.Sandbox) {
	dir := t.TempDir()
	path := filepath.Join(dir, "host.sock")
	abstract := "@" + marker()
	var counts []*atomic.Int32
	for _, addr := range []string{path, abstract} {
		ln, err := net.Listen("unix", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		counts = append(counts, countAccepts(ln))
	}
	connect := func(addr string) string {
		return fmt.Sprintf("s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(%q)", addr)
	}
	attempts := []string{
		connect(path),
		connect("\x00" + abstract[1:]),
		connect("/var/run/docker.sock"),
		connect("/run/systemd/private"),
		connect("/tmp/.X11-unix/X0"),
	}
	res := execute(t, sb, program{lang: "python", code: leakCheck(attempts...)})
	wantAllBlocked(t, res, len(attempts))
	for _, c := range counts {
		if n := c.Load(); n != 0 {
			t.Fatalf("host unix sockets accepted %d connections", n)
		}
	}
}

// countAccepts accepts and closes connections on ln until it is closed,
// counting them.
func countAccepts(ln net.Listener) *atomic.Int32 {
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return &n
}

func killHost(t *testing.T, sb sandbox.Sandbox) {
	victim := exec.Command("sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = victim.Process.Kill(); _ = victim.Wait() }()
	pid := victim.Process.Pid
	attempts := []string{
		fmt.Sprintf("os.kill(%d, 9)", pid),
		fmt.Sprintf("os.kill(%d, 9)", os.Getpid()),
	}
	res := execute(t, sb, program{lang: "python", code: leakCheck(attempts...) + "os.kill(-1, 9)\n"})
	if !bytes.Contains(res.Stdout, []byte("blocked")) || bytes.Contains(res.Stdout, []byte("LEAK 0")) || bytes.Contains(res.Stdout, []byte("LEAK 1")) {
		t.Fatalf("kill attempts: %s %s", res.Stdout, res.Stderr)
	}
	if err := victim.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the host process was killed: %v", err)
	}
}

func envLeak(t *testing.T, sb sandbox.Sandbox) {
	t.Setenv("CODEAGENT_TEST_SECRET", "s3cr3t-value")
	res := execute(t, sb, program{lang: "bash", env: map[string]string{"EXPLICIT": "yes"}, code: "env"})
	wantStatus(t, res, sandbox.StatusOK)
	allowed := map[string]bool{"PATH": true, "HOME": true, "LANG": true, "TMPDIR": true, "PWD": true,
		"EXPLICIT": true, "SHLVL": true, "_": true, "OLDPWD": true}
	for _, k := range sandbox.ThreadVars {
		allowed[k] = true
	}
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		k, _, _ := strings.Cut(line, "=")
		if !allowed[k] {
			t.Errorf("unexpected variable in the sandbox: %s", line)
		}
	}
	if bytes.Contains(res.Stdout, []byte("s3cr3t")) || !bytes.Contains(res.Stdout, []byte("EXPLICIT=yes")) {
		t.Fatalf("environment: %s", res.Stdout)
	}
}

// threadPools checks that numerical libraries are told the CPU limit, not
// the host's CPU count (see sandbox.WithThreadEnv), unless the program's
// environment says otherwise; so is Go's runtime (GOMAXPROCS), whose
// go run would otherwise reach the process limit on a large host.
func threadPools(t *testing.T, sb sandbox.Sandbox) {
	code := "echo $OMP_NUM_THREADS $OPENBLAS_NUM_THREADS $MKL_NUM_THREADS $GOMAXPROCS"
	for _, c := range []struct {
		cpus float64
		env  map[string]string
		want string
	}{
		{0, nil, "1 1 1 1"},
		{1.5, nil, "2 2 2 2"},
		{1, map[string]string{"OPENBLAS_NUM_THREADS": "3"}, "1 3 1 1"},
	} {
		res := execute(t, sb, program{lang: "bash", code: code, env: c.env, limits: sandbox.Limits{CPUs: c.cpus}})
		wantStatus(t, res, sandbox.StatusOK)
		if got := strings.TrimSpace(string(res.Stdout)); got != c.want {
			t.Errorf("%g CPUs, env %v: thread pools %q, want %q", c.cpus, c.env, got, c.want)
		}
	}
}

// syscallNumbers are the syscalls privileges() tries, per machine.
const syscallNumbers = `
import os
nr = {"x86_64": {"io_uring_setup": 425, "bpf": 321, "userfaultfd": 323, "keyctl": 250, "perf_event_open": 298, "unshare": 272, "kexec_load": 246, "open_by_handle_at": 304, "init_module": 175},
      "aarch64": {"io_uring_setup": 425, "bpf": 280, "userfaultfd": 282, "keyctl": 219, "perf_event_open": 241, "unshare": 97, "kexec_load": 104, "open_by_handle_at": 265, "init_module": 105}}[os.uname().machine]
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def sys_(name, *args):
    if libc.syscall(nr[name], *args) == -1:
        raise OSError(ctypes.get_errno(), name)
def call(name, *args):
    if getattr(libc, name)(*args) == -1:
        raise OSError(ctypes.get_errno(), name)
def ptrace_child():
    pid = os.fork()
    if pid == 0:
        import time
        time.sleep(5)
        os._exit(0)
    try:
        call('ptrace', 16, pid, None, None)
    finally:
        os.kill(pid, 9)
`

func privileges(t *testing.T, sb sandbox.Sandbox) {
	attempts := []string{
		"call('mount', b'none', b'/tmp', b'tmpfs', 0, None)",
		"call('umount2', b'/proc', 2)",
		"os.chroot('/tmp')",
		"sys_('unshare', 0x10000000)",
		"sys_('unshare', 0x00020000)",
		"ptrace_child()",
		"sys_('io_uring_setup', 8, ctypes.create_string_buffer(120))",
		"sys_('bpf', 0, None, 0)",
		"sys_('userfaultfd', 0)",
		"sys_('keyctl', 0, 0)",
		"sys_('perf_event_open', None, 0, -1, -1, 0)",
		"sys_('kexec_load', 0, 0, None, 0)",
		"sys_('open_by_handle_at', 3, None, 0)",
		"sys_('init_module', None, 0, b'')",
		"os.setuid(0)",
		"open('/proc/sys/kernel/hostname', 'w').write('owned')",
		"open('/proc/sysrq-trigger', 'w').write('h')",
		"assert 'CapEff:\\t0000000000000000' not in open('/proc/self/status').read()",
		"assert 'NoNewPrivs:\\t1' not in open('/proc/self/status').read()",
	}
	res := execute(t, sb, program{lang: "python", code: syscallNumbers + leakCheck(attempts...)})
	wantAllBlocked(t, res, len(attempts))
}

func devices(t *testing.T, sb sandbox.Sandbox) {
	attempts := []string{
		"open('/dev/sda', 'rb')",
		"open('/dev/vda', 'rb')",
		"open('/dev/mem', 'rb')",
		"open('/dev/kmsg', 'rb')",
		"open('/dev/tty', 'rb')",
		"import stat; os.mknod('/tmp/null2', stat.S_IFCHR | 0o666, os.makedev(1, 3)); open('/tmp/null2', 'rb')",
		"os.listdir('/sys/class')",
	}
	res := execute(t, sb, program{lang: "python", code: leakCheck(attempts...) +
		"open('/dev/null', 'w').write('x'); assert len(open('/dev/urandom', 'rb').read(8)) == 8; print('devices', sorted(os.listdir('/dev')))\n"})
	wantAllBlocked(t, res, len(attempts))
	if !bytes.Contains(res.Stdout, []byte("devices")) {
		t.Fatalf("/dev/null or /dev/urandom unusable: %s", res.Stderr)
	}
}

func procIsolation(t *testing.T, sb sandbox.Sandbox) {
	res := execute(t, sb, program{lang: "python", code: fmt.Sprintf(`
import os
pids = [p for p in os.listdir('/proc') if p.isdigit()]
print(len(pids), os.path.exists('/proc/%d'))
`, os.Getpid())})
	wantStatus(t, res, sandbox.StatusOK)
	f := strings.Fields(string(res.Stdout))
	if len(f) != 2 {
		t.Fatalf("stdout %q", res.Stdout)
	}
	if n, _ := strconv.Atoi(f[0]); n > 5 || n == 0 {
		t.Errorf("the sandbox sees %d processes", n)
	}
	if f[1] != "False" && os.Getpid() > 10 {
		t.Errorf("the sandbox sees the host test process")
	}
}

func tmpPersistence(t *testing.T, sb sandbox.Sandbox) {
	m := marker()
	res := execute(t, sb, program{lang: "bash", code: fmt.Sprintf("echo x > /tmp/%s && echo y > /dev/shm/%s && echo written", m, m)})
	if !bytes.Contains(res.Stdout, []byte("written")) {
		t.Fatalf("could not write /tmp and /dev/shm: %s", res.Stderr)
	}
	res = execute(t, sb, program{lang: "bash", code: fmt.Sprintf("ls /tmp/%s /dev/shm/%s 2>/dev/null; echo checked", m, m)})
	if strings.TrimSpace(string(res.Stdout)) != "checked" {
		t.Fatalf("files persisted between runs: %s", res.Stdout)
	}
	if fileExists("/tmp/"+m) || fileExists("/dev/shm/"+m) {
		t.Fatalf("sandbox files reached the host's /tmp or /dev/shm")
	}
}

func inheritedFDs(t *testing.T, sb sandbox.Sandbox) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A descriptor without close-on-exec, as a careless host program may hold.
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	// A high number, beyond the descriptors a backend passes on purpose.
	const leaked = 700
	if err := syscall.Dup3(fd, leaked, 0); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(leaked)
	res := execute(t, sb, program{lang: "python", code: `
import os
found = []
for fd in range(3, 1024):
    try:
        found.append(open("secret.txt", opener=lambda p, f: os.open(p, f, dir_fd=fd)).read())
    except OSError:
        pass
print("fds", sorted(os.listdir("/proc/self/fd")), found)
`})
	wantStatus(t, res, sandbox.StatusOK)
	if bytes.Contains(res.Stdout, []byte("host secret")) {
		t.Fatalf("an inherited descriptor reached the sandbox: %s", res.Stdout)
	}
}
