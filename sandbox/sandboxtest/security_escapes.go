package sandboxtest

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

// The escapes below were reproduced against earlier versions of the
// backends: kernel attack surface through socket families and foreign
// system call ABIs, setuid files, a sandbox uid that is a real account, and
// resource limits bypassed through socket buffers or a fixed CPU quota.

// probePrelude is Python that runs one attempt in a forked child, so that a
// seccomp kill is an outcome, not the end of the program: child(fn) returns
// (signal, None) when the child was killed, else (None, fn's value), where
// an OSError becomes minus its errno.
const probePrelude = `
import ctypes, errno, mmap, os, socket, stat, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
keep = []
def cbuf(b, size=None):
    # A C buffer that lives as long as the program, and its address.
    keep.append(ctypes.create_string_buffer(b, size or len(b) + 1))
    return ctypes.addressof(keep[-1])
def ret(v):
    return v if v != -1 else -ctypes.get_errno()
def sys_(nr, *args):
    return ret(libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args]))
def child(fn):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            v = fn() or 0
        except OSError as e:
            v = -(e.errno or 100000)
        except BaseException as e:
            print("probe error:", repr(e), file=sys.stderr, flush=True)
            v = -100000
        os.write(w, str(v).encode())
        os._exit(0)
    os.close(w)
    data = b''
    while True:
        b = os.read(r, 64)
        if not b:
            break
        data += b
    os.close(r)
    _, st = os.waitpid(pid, 0)
    if os.WIFSIGNALED(st):
        return os.WTERMSIG(st), None
    return None, int(data or b'-100001')
def name(v):
    return errno.errorcode.get(-v, str(v)) if v < 0 else str(v)
`

// socketFamilies tries every socket family outside the allow list (AF_UNIX,
// AF_INET, AF_INET6, AF_NETLINK with NETLINK_ROUTE): each must be refused
// before the kernel's family code runs (EPERM, EAFNOSUPPORT, or for another
// netlink protocol EPROTONOSUPPORT), and the allowed ones must still work
// over loopback. (The kernel reads the family as an int, so high bits above
// it select nothing more: a filter may look at the low half only.)
func socketFamilies(t *testing.T, sb sandbox.Sandbox) {
	sysSocket, sysSocketpair := 41, 53
	if runtime.GOARCH == "arm64" {
		sysSocket, sysSocketpair = 198, 199
	}
	code := probePrelude + fmt.Sprintf(`
def vsock():
    s = socket.socket(40, socket.SOCK_STREAM)
    s.bind((0xFFFFFFFF, 5000))
    s.listen()
    return s.detach()
foreign = [("AF_VSOCK stream bind+listen", vsock),
           ("AF_VSOCK dgram", lambda: socket.socket(40, socket.SOCK_DGRAM).detach()),
           ("AF_VSOCK high bits", lambda: sys_(%d, 40 | 1 << 32, 1, 0)),
           ("AF_UNSPEC", lambda: socket.socket(0, socket.SOCK_DGRAM).detach())]
for fam, typ, proto, label in [(17, 2, 0, "AF_PACKET dgram"), (17, 3, 0, "AF_PACKET raw"),
        (31, 1, 3, "AF_BLUETOOTH rfcomm"), (31, 3, 1, "AF_BLUETOOTH hci"), (38, 5, 0, "AF_ALG"),
        (15, 3, 2, "AF_KEY"), (21, 5, 0, "AF_RDS"), (30, 4, 0, "AF_TIPC"), (29, 3, 1, "AF_CAN"),
        (44, 3, 0, "AF_XDP"), (41, 2, 0, "AF_KCM"), (42, 2, 0, "AF_QIPCRTR"), (43, 1, 0, "AF_SMC"),
        (45, 2, 0, "AF_MCTP"), (24, 1, 0, "AF_PPPOX"), (26, 2, 0, "AF_LLC"), (36, 3, 0, "AF_IEEE802154"),
        (35, 2, 0, "AF_PHONET"), (39, 5, 0, "AF_NFC"), (9, 5, 0, "AF_X25"), (3, 5, 0, "AF_AX25"),
        (5, 2, 0, "AF_APPLETALK"), (4, 2, 0, "AF_IPX"), (46, 1, 0, "family 46")] + [
        (16, 3, p, "AF_NETLINK protocol %%d" %% p) for p in (4, 6, 7, 9, 10, 11, 12, 15, 16, 20, 21)]:
    foreign.append((label, lambda f=fam, ty=typ, p=proto: socket.socket(f, ty, p).detach()))
for fam, typ, label in [(40, 1, "AF_VSOCK"), (16, 3, "AF_NETLINK"), (2, 1, "AF_INET"), (17, 2, "AF_PACKET"), (10, 2, "AF_INET6")]:
    foreign.append(("socketpair " + label, lambda f=fam, ty=typ: sys_(%d, f, ty, 0, cbuf(bytes(8)))))
for label, fn in foreign:
    sig, v = child(fn)
    if sig is None and v not in (-errno.EPERM, -errno.EAFNOSUPPORT, -errno.EPROTONOSUPPORT):
        print("LEAK %%s: %%s" %% (label, name(v)))
def tcp(fam, host):
    srv = socket.socket(fam, socket.SOCK_STREAM)
    srv.bind((host, 0))
    srv.listen()
    c = socket.create_connection(srv.getsockname()[:2], timeout=5)
    s, _ = srv.accept()
    c.sendall(b"ping")
    assert s.recv(4) == b"ping"
    return 0
def udp():
    a, b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM), socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    a.bind(("127.0.0.1", 0))
    b.sendto(b"x", a.getsockname())
    assert a.recv(1) == b"x"
    return 0
def unix():
    a, b = socket.socketpair()
    a.sendall(b"x")
    assert b.recv(1) == b"x"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind("/tmp/sock")
    srv.listen()
    c = socket.socket(socket.AF_UNIX)
    c.connect("/tmp/sock")
    return 0
def route():
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()
    assert "lo" in [n for _, n in socket.if_nameindex()]
    return 0
def inet6():
    socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()
    try:
        return tcp(socket.AF_INET6, "::1")
    except OSError as e:
        return 0 if e.errno == errno.EADDRNOTAVAIL else -e.errno
for label, fn in [("tcp 127.0.0.1", lambda: tcp(socket.AF_INET, "127.0.0.1")), ("udp", udp),
                  ("unix", unix), ("netlink route", route), ("tcp ::1", inet6)]:
    sig, v = child(fn)
    if sig is not None or v != 0:
        print("BROKEN %%s: %%s" %% (label, name(v) if sig is None else "signal %%d" %% sig))
print("checked", len(foreign))
`, sysSocket, sysSocketpair)
	res := execute(t, sb, program{lang: "python", code: code})
	wantStatus(t, res, sandbox.StatusOK)
	if bytes.Contains(res.Stdout, []byte("LEAK")) || bytes.Contains(res.Stdout, []byte("BROKEN")) || !bytes.Contains(res.Stdout, []byte("checked")) {
		t.Fatalf("socket families:\n%s\nstderr: %s", res.Stdout, res.Stderr)
	}
}

// foreignABIs makes system calls through the i386 ABI (int 0x80 from 64-bit
// code: socketcall, socket, getpid), the x32 ABI (numbers with bit 30 set)
// and modify_ldt. Each must fail or kill the caller, never succeed.
func foreignABIs(t *testing.T, sb sandbox.Sandbox) {
	if runtime.GOARCH != "amd64" {
		t.Skip("i386, x32 and modify_ldt exist on x86-64 only")
	}
	code := probePrelude + `
def int80(nr, a1=0, a2=0, a3=0, args=None):
    # Machine code: push rbx; mov eax, nr; mov ebx, a1; mov ecx, a2;
    # mov edx, a3; int 0x80; pop rbx; ret. Below 2 GiB (MAP_32BIT), so that
    # 32-bit pointers reach the argument block.
    m = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40,
                  prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    assert base < 1 << 31
    if args is not None:
        m[2048:2048 + 4 * len(args)] = struct.pack("<%dI" % len(args), *args)
        a2 = base + 2048
    code = struct.pack("<BBIBIBIBIBBBB", 0x53, 0xB8, nr, 0xBB, a1, 0xB9, a2, 0xBA, a3, 0xCD, 0x80, 0x5B, 0xC3)
    m[0:len(code)] = code
    return ctypes.CFUNCTYPE(ctypes.c_int)(base)()
X32 = 0x40000000
attempts = [
    ("i386 socketcall(SYS_SOCKET, AF_VSOCK)", lambda: int80(102, 1, args=[40, 1, 0]), False),
    ("i386 socketcall(SYS_SOCKET, AF_NETLINK audit)", lambda: int80(102, 1, args=[16, 3, 9]), False),
    ("i386 socketcall(SYS_SOCKET, AF_INET)", lambda: int80(102, 1, args=[2, 1, 0]), False),
    ("i386 socket(AF_VSOCK)", lambda: int80(359, 40, 1, 0), False),
    ("i386 getpid", lambda: int80(20), True),
    ("x32 getpid", lambda: sys_(X32 | 39), True),
    ("x32 socket(AF_VSOCK)", lambda: sys_(X32 | 41, 40, 1, 0), False),
    ("modify_ldt read", lambda: sys_(154, 0, cbuf(bytes(64)), 64), False),
    ("modify_ldt write", lambda: sys_(154, 1, cbuf(bytes(16)), 16), False),
]
for label, fn, positive in attempts:
    sig, v = child(fn)
    if sig is None and (v >= 0 if not positive else v > 0):
        print("LEAK %s: %s" % (label, name(v)))
    else:
        print("refused %s: %s" % (label, name(v) if sig is None else "signal %d" % sig))
print("checked", len(attempts))
`
	res := execute(t, sb, program{lang: "python", code: code})
	wantStatus(t, res, sandbox.StatusOK)
	if bytes.Contains(res.Stdout, []byte("LEAK")) || !bytes.Contains(res.Stdout, []byte("checked")) {
		t.Fatalf("foreign ABIs:\n%s\nstderr: %s", res.Stdout, res.Stderr)
	}
	t.Logf("%s", res.Stdout)
}

// xattrNames lists the extended attributes of p.
func xattrNames(p string) []string {
	buf := make([]byte, 4096)
	n, err := syscall.Listxattr(p, buf)
	if err != nil || n <= 0 {
		return nil
	}
	var out []string
	for _, a := range strings.Split(string(buf[:n]), "\x00") {
		if a != "" {
			out = append(out, a)
		}
	}
	return out
}

// setuidFiles tries every way of giving a workspace file the setuid or
// setgid bit (chmod family, modes of open, creat, mkdir and mknod, raw
// system calls, openat2) and fallocate: all refused inside, and on the host
// no file of the workspace is setuid or setgid or carries extended
// attributes afterwards. Ordinary modes and posix_fallocate still work.
func setuidFiles(t *testing.T, sb sandbox.Sandbox) {
	nr := map[string]int{"chmod": 90, "fchmodat": 268, "fchmodat2": 452, "open": 2, "creat": 85, "mkdir": 83, "mknod": 133, "openat2": 437, "fallocate": 285}
	if runtime.GOARCH == "arm64" {
		nr = map[string]int{"fchmodat": 53, "fchmodat2": 452, "openat2": 437, "fallocate": 47}
	}
	var nrs []string
	for k, v := range nr {
		nrs = append(nrs, fmt.Sprintf("%q: %d", k, v))
	}
	code := probePrelude + "NR = {" + strings.Join(nrs, ", ") + "}\n" + `
import shutil
shutil.copy("/bin/sh", "sh")
open("f", "w").write("x")
try:
    os.setxattr("f", "user.codeagent", b"x")
except OSError:
    pass
def fchmod():
    fd = os.open("f", os.O_RDONLY)
    os.fchmod(fd, 0o6755)
def here():
    return os.open(".", os.O_RDONLY)
def how(mode):
    return cbuf(struct.pack("<QQQ", os.O_CREAT | os.O_WRONLY, mode, 0))
attempts = [("chmod 4755 sh", lambda: os.chmod("sh", 0o4755), "sh"),
            ("chmod 2755 f", lambda: os.chmod("f", 0o2755), "f"),
            ("fchmod 6755 f", fchmod, "f"),
            ("open 4755", lambda: os.open("o1", os.O_CREAT | os.O_WRONLY, 0o4755), "o1"),
            ("openat 2755", lambda: os.open("o2", os.O_CREAT | os.O_WRONLY, 0o2755, dir_fd=here()), "o2"),
            ("creat 4755", lambda: ret(libc.creat(b"c1", 0o4755)), "c1"),
            ("mkdir 2775", lambda: os.mkdir("d1", 0o2775), "d1"),
            ("mkdirat 4775", lambda: os.mkdir("d2", 0o4775, dir_fd=here()), "d2"),
            ("mknod 4755", lambda: os.mknod("n1", stat.S_IFREG | 0o4755), "n1"),
            ("mknodat 2755", lambda: os.mknod("n2", stat.S_IFREG | 0o2755, dir_fd=here()), "n2"),
            ("fchmodat 4755", lambda: sys_(NR["fchmodat"], -100, cbuf(b"f"), 0o4755), "f"),
            ("fchmodat2 4755", lambda: sys_(NR["fchmodat2"], -100, cbuf(b"f"), 0o4755, 0), "f"),
            ("openat2 4755", lambda: sys_(NR["openat2"], -100, cbuf(b"o3"), how(0o4755), 24), "o3")]
raw = {"chmod": ("f", [0o4755]), "open": ("r_open", [os.O_CREAT | os.O_WRONLY, 0o4755]), "creat": ("r_creat", [0o2755]),
       "mkdir": ("r_mkdir", [0o2775]), "mknod": ("r_mknod", [stat.S_IFREG | 0o4755, 0])}
for call, (target, args) in raw.items():
    if call in NR:
        attempts.append(("raw " + call, lambda n=NR[call], p=target, a=args: sys_(n, cbuf(p.encode()), *a), target))
for label, fn, target in attempts:
    sig, v = child(fn)
    mode = os.lstat(target).st_mode if os.path.lexists(target) else 0
    if mode & (stat.S_ISUID | stat.S_ISGID) or (sig is None and v not in (-errno.EPERM, -errno.ENOSYS)):
        print("LEAK %s: %s, mode %o" % (label, name(v) if sig is None else "signal %d" % sig, mode))
for fmode in (0, 1):  # 1: FALLOC_FL_KEEP_SIZE, which RLIMIT_FSIZE does not bound
    _, v = child(lambda m=fmode: sys_(NR["fallocate"], os.open("fa", os.O_CREAT | os.O_WRONLY, 0o644), m, 0, 1 << 20))
    if v != -errno.EOPNOTSUPP:
        print("LEAK fallocate mode %d: %s" % (fmode, name(v)))
if os.stat("fa").st_blocks:
    print("LEAK fallocate allocated", os.stat("fa").st_blocks * 512)
fd = os.open("pf", os.O_CREAT | os.O_WRONLY, 0o644)
os.posix_fallocate(fd, 0, 1 << 20)
assert os.fstat(fd).st_size == 1 << 20
os.chmod("f", 0o750)
os.mkdir("ok", 0o755)
os.close(os.open("ok/plain", os.O_CREAT | os.O_WRONLY, 0o600))
print("checked", len(attempts))
`
	ws := t.TempDir()
	res := execute(t, sb, program{lang: "python", ws: ws, code: code})
	if bytes.Contains(res.Stdout, []byte("LEAK")) || !bytes.Contains(res.Stdout, []byte("checked")) {
		t.Errorf("setuid and setgid files:\n%s\nstderr: %s", res.Stdout, res.Stderr)
	}
	n := 0
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		n++
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 && p != ws {
			t.Errorf("on the host, %s is %v", p, fi.Mode())
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			// user.* attributes are the program's data; security.* and
			// trusted.* ones (file capabilities, labels) must never come
			// from it.
			for _, a := range xattrNames(p) {
				if strings.HasPrefix(a, "security.") || strings.HasPrefix(a, "trusted.") {
					t.Errorf("on the host, %s has the attribute %s", p, a)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !fileExists(filepath.Join(ws, "ok/plain")) || !fileExists(filepath.Join(ws, "sh")) {
		t.Errorf("the workspace did not come back (%d entries)", n)
	}
}

// hostUID finds the sandboxed process on the host while it runs (by a name
// it gives itself) and checks its user and group ids: neither root nor any
// account or group of this host.
func hostUID(t *testing.T, sb sandbox.Sandbox) {
	comm := marker()[:15]
	code := fmt.Sprintf(`
import ctypes, os, time
ctypes.CDLL(None).prctl(15, %q.encode(), 0, 0, 0)
open("mine.txt", "w").write("x")
print("inside", os.getuid(), os.getgid(), flush=True)
time.sleep(3)
`, comm)
	found := make(chan string, 1)
	stop := make(chan struct{})
	go func() {
		defer close(found)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			entries, _ := os.ReadDir("/proc")
			for _, e := range entries {
				c, err := os.ReadFile("/proc/" + e.Name() + "/comm")
				if err != nil || strings.TrimSpace(string(c)) != comm {
					continue
				}
				if st, err := os.ReadFile("/proc/" + e.Name() + "/status"); err == nil {
					found <- string(st)
					return
				}
			}
		}
	}()
	res := execute(t, sb, program{lang: "python", code: code, limits: sandbox.Limits{WallTime: 10 * time.Second}})
	close(stop)
	status, ok := <-found
	wantStatus(t, res, sandbox.StatusOK)
	if !ok {
		t.Fatalf("the sandboxed process was not found on the host (stdout %s)", res.Stdout)
	}
	users, groups := accountIDs(t, "/etc/passwd"), accountIDs(t, "/etc/group")
	for _, line := range strings.Split(status, "\n") {
		key, val, _ := strings.Cut(line, ":")
		db, which := users, "/etc/passwd"
		switch key {
		case "Uid":
		case "Gid", "Groups":
			db, which = groups, "/etc/group"
		default:
			continue
		}
		seen := map[int]bool{}
		for _, f := range strings.Fields(val) {
			id, _ := strconv.Atoi(f)
			if seen[id] {
				continue
			}
			seen[id] = true
			if id == 0 {
				t.Errorf("on the host the sandbox runs with %s %d (root)", key, id)
			} else if name, ok := db[id]; ok && (os.Geteuid() == 0 || id != os.Getuid() && id != os.Getgid()) {
				// Unprivileged, a backend can only use the caller's own ids.
				t.Errorf("on the host the sandbox runs with %s %d, which is %q in %s", key, id, name, which)
			}
		}
	}
	t.Logf("%s; host %s", strings.TrimSpace(string(res.Stdout)), strings.Join(strings.Fields(grepLine(status, "Uid:")), " "))
}

// accountIDs reads the numeric ids of a passwd or group file.
func accountIDs(t *testing.T, file string) map[int]string {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids := map[int]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) > 2 {
			if id, err := strconv.Atoi(fields[2]); err == nil {
				ids[id] = fields[0]
			}
		}
	}
	return ids
}

func grepLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
