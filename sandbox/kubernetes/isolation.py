# codeagent's isolation probe: run by the kubernetes backend as a program
# in a sandbox Pod (python3 -I -S -c SOURCE ARGS), before any user program
# runs in Pods of that template. It tries what the conformance suite
# relies on being refused and prints one JSON line per check:
#   {"check": NAME, "ok": true|false, "detail": "..."}
# then {"done": N}. ARGS is a JSON object: {"processes": N, "connect":
# ["ip:port", ...]}. Every attempt is bounded: threads up to the limit plus
# 16, connections of 1.5 s; forked children end within seconds.
import ctypes, json, mmap, os, signal, socket, struct, sys, threading, time

args = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
machine = os.uname().machine
NR = {"x86_64": {"io_uring_setup": 425, "bpf": 321, "keyctl": 250, "unshare": 272, "ptrace": 101},
      "aarch64": {"io_uring_setup": 425, "bpf": 280, "keyctl": 219, "unshare": 97, "ptrace": 117}}.get(machine)
checks = 0


def report(name, ok, detail):
    global checks
    checks += 1
    print(json.dumps({"check": name, "ok": bool(ok), "detail": detail}), flush=True)


def sys_(name, *a):
    r = libc.syscall(ctypes.c_long(NR[name]), *a)
    return r, ctypes.get_errno()


def errname(e):
    import errno
    return errno.errorcode.get(e, str(e))


def in_child(fn, timeout=5.0):
    """Runs fn in a forked child; returns ("signal", n) or ("value", v)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            v = fn()
        except BaseException as e:  # noqa: BLE001
            v = "exception " + repr(e)
        os.write(w, json.dumps(v).encode())
        os._exit(0)
    os.close(w)
    deadline = time.monotonic() + timeout
    while True:
        p, status = os.waitpid(pid, os.WNOHANG)
        if p:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            return ("timeout", None)
        time.sleep(0.01)
    data = os.read(r, 4096)
    os.close(r)
    if os.WIFSIGNALED(status):
        return ("signal", os.WTERMSIG(status))
    return ("value", json.loads(data) if data else None)


def refused_syscall(name, label, *a):
    def attempt():
        r, e = sys_(name, *a)
        return [r, e]
    kind, v = in_child(attempt)
    if kind == "signal":
        report(name, True, "%s: killed by signal %d" % (label, v))
    elif kind == "value" and isinstance(v, list) and v[0] < 0:
        report(name, True, "%s: refused (%s)" % (label, errname(v[1])))
    else:
        report(name, False, "%s succeeded" % label)


def main():
    if NR is None:
        report("machine", False, "unknown machine %s: the probe knows x86_64 and aarch64" % machine)
        return
    # io_uring: a large kernel attack surface.
    refused_syscall("io_uring_setup", "io_uring_setup(8)", 8, ctypes.create_string_buffer(120))
    # ptrace of PID 1 (the Pod's lifeline, which the copy in and out needs)
    # and of a child of its own.
    def ptrace_pid1():
        r, e = sys_("ptrace", 16, 1, None, None)  # PTRACE_ATTACH
        if r == 0:
            sys_("ptrace", 17, 1, None, None)  # PTRACE_DETACH
        return [r, e]
    kind, v = in_child(ptrace_pid1)
    pid1 = kind == "value" and isinstance(v, list) and v[0] == 0
    child = os.fork()
    if child == 0:
        time.sleep(5)
        os._exit(0)
    r, e = sys_("ptrace", 16, child, None, None)
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    if pid1 or r == 0:
        report("ptrace", False, "ptrace attached to " + ("PID 1" if pid1 else "a child process"))
    else:
        report("ptrace", True, "PTRACE_ATTACH refused (%s)" % errname(e))
    # A user namespace would give the program capabilities in it.
    refused_syscall("unshare", "unshare(CLONE_NEWUSER)", 0x10000000)
    # The kernel keyring: KEYCTL_JOIN_SESSION_KEYRING with no name.
    refused_syscall("keyctl", "keyctl(KEYCTL_JOIN_SESSION_KEYRING)", 1, None)
    # bpf: BPF_MAP_CREATE of a one-entry array map.
    attr = ctypes.create_string_buffer(struct.pack("<IIII", 2, 4, 4, 1) + bytes(112))
    refused_syscall("bpf", "bpf(BPF_MAP_CREATE)", 0, attr, 128)
    # The i386 ABI (int 0x80 from 64-bit code), which seccomp filters of
    # x86_64 alone do not see unless they check the architecture.
    if machine == "x86_64":
        def stub(code):
            # Runs machine code below 2 GiB (MAP_32BIT), returning eax.
            m = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40,
                          prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
            base = ctypes.addressof(ctypes.c_char.from_buffer(m))
            m[0:len(code)] = code
            return ctypes.CFUNCTYPE(ctypes.c_int)(base)()
        # push rbx; mov eax, 20 (i386 getpid); mov ebx/ecx/edx, 0; int 0x80; pop rbx; ret
        int80 = struct.pack("<BBIBIBIBIBBBB", 0x53, 0xB8, 20, 0xBB, 0, 0xB9, 0, 0xBA, 0, 0xCD, 0x80, 0x5B, 0xC3)
        # The control: the same stub with the 64-bit syscall instruction
        # (getpid, 39) must work, so that a fault of int 0x80 is the
        # kernel's refusal and not a broken stub.
        control = struct.pack("<BBIBBBB", 0x53, 0xB8, 39, 0x0F, 0x05, 0x5B, 0xC3)
        ckind, cv = in_child(lambda: stub(control))
        kind, v = in_child(lambda: stub(int80))
        if ckind != "value" or not isinstance(cv, int) or cv <= 0:
            report("i386", False, "not checked: the probe's machine code did not run (%s %r)" % (ckind, cv))
        elif kind == "signal":
            report("i386", True, "int 0x80 getpid: killed by signal %d" % v)
        elif kind == "value" and isinstance(v, int) and v <= 0:
            report("i386", True, "int 0x80 getpid: refused (%s)" % errname(-v))
        else:
            report("i386", False, "int 0x80 getpid succeeded (%r)" % (v,))
    # The process limit: threads count as the Pod's processes.
    limit = int(args.get("processes", 64))
    want = min(limit, 4096) + 16
    threading.stack_size(64 << 10)
    stop = threading.Event()
    started = 0
    try:
        for _ in range(want):
            threading.Thread(target=stop.wait, args=(30,), daemon=True).start()
            started += 1
    except RuntimeError:
        pass
    stop.set()
    if started >= want:
        report("processes", False, "no process limit: %d threads started (limit %d)" % (started, limit))
    else:
        report("processes", True, "a limit stopped the program at %d threads (limit %d)" % (started, limit))
    # Root-only /proc files about the host and other users.
    leaked = []
    for p in ["/proc/keys", "/proc/key-users", "/proc/kpageflags", "/proc/kpagecount", "/proc/kpagecgroup",
              "/proc/slabinfo", "/proc/vmallocinfo", "/proc/pagetypeinfo", "/proc/timer_list", "/proc/sched_debug",
              "/proc/kmsg", "/proc/iomem", "/proc/ioports", "/proc/zoneinfo", "/proc/kcore", "/proc/latency_stats"]:
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if os.read(fd, 256):
                leaked.append(p)
        except OSError:
            pass
        finally:
            os.close(fd)
    report("proc", not leaked, "readable: " + ", ".join(leaked) if leaked else "root-only /proc files masked")
    # A service-account token would let the program call the API server.
    tokens = [p for p in ["/var/run/secrets/kubernetes.io/serviceaccount/token", "/run/secrets/kubernetes.io/serviceaccount/token"]
              if os.path.exists(p)]
    report("token", not tokens, "service-account token at " + tokens[0] if tokens else "no service-account token")
    # The network: no interface but loopback, or nothing reached.
    with open("/proc/net/dev") as f:
        ifaces = [l.split(":")[0].strip() for l in f.read().splitlines()[2:] if ":" in l]
    ifaces = [i for i in ifaces if i != "lo"]
    if not ifaces:
        report("network", True, "no interface but loopback")
        return
    targets = list(args.get("connect", []))
    try:
        with open("/proc/net/route") as f:
            for l in f.read().splitlines()[1:]:
                fields = l.split()
                if len(fields) > 2 and fields[1] == "00000000" and fields[2] != "00000000":
                    gw = socket.inet_ntoa(struct.pack("<I", int(fields[2], 16)))
                    targets += [gw + ":10250", gw + ":443", gw + ":53"]
    except OSError:
        pass
    reached = []
    for t in targets:
        host, port = t.rsplit(":", 1)
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(1.5)
        try:
            s.connect((host.strip("[]"), int(port)))
            reached.append(t + " (connected)")
        except ConnectionRefusedError:
            reached.append(t + " (refused: the packets got there)")
        except OSError:
            pass
        finally:
            s.close()
    if reached:
        report("network", False, "interfaces %s; reached %s" % (", ".join(ifaces), ", ".join(reached)))
    else:
        report("network", True, "interfaces %s, but none of %d addresses reached" % (", ".join(ifaces), len(targets)))


main()
print(json.dumps({"done": checks}), flush=True)
