# The Pod's agent, run by the kubernetes backend through the exec API, as the
# program's uid, in the program's container, started with the Pod's other
# exec (the program's, which waits for its argv) before the Pod is taken for
# a run. It stages the workspace and files that codeagent sends, watches the
# program (a pidfd on the waiting exec's process) and the workspace's size,
# then kills every process left (kill(-1): all of the uid's processes in the
# container but PID 1 and itself), and sends back the state of the
# workspace: changed entries whole, unchanged ones by name.
#
# Frames both ways: a type byte, a 4-byte big-endian length, the payload.
# Everything it sends is treated by codeagent as the program's (bounded,
# never trusted): the program can kill it or write into its streams.
import json, os, select, signal, stat, struct, sys, time

WS = "/workspace"
MARK = sys.argv[1] if len(sys.argv) > 1 else ""
RECOVER = len(sys.argv) > 2 and sys.argv[2] == "recover"
inbuf = b""

outbuf = bytearray()

def send(t, payload=b"", flush=True):
    # Frames are gathered (each write is a message through the kubelet and
    # the API server): written when flush is asked or 256 KiB are waiting.
    outbuf.extend(t + struct.pack(">I", len(payload)) + payload)
    if flush or len(outbuf) >= 256 << 10:
        data = memoryview(bytes(outbuf))
        del outbuf[:]
        while data:
            n = os.write(1, data)
            data = data[n:]

def sendj(t, obj):
    send(t, json.dumps(obj).encode())

inpos = 0  # what of inbuf was read already

def buffered():
    return len(inbuf) - inpos

def readn(n):
    global inbuf, inpos
    if inpos > 1 << 20 or inpos == len(inbuf):
        inbuf, inpos = inbuf[inpos:], 0
    while buffered() < n:
        b = os.read(0, max(1 << 20, n - buffered()))
        if not b:
            raise EOFError
        inbuf += b
    out = inbuf[inpos:inpos + n]
    inpos += n
    return out

def recv():
    h = readn(5)
    return h[:1], readn(struct.unpack(">I", h[1:])[0])

def find_program():
    want = ("codeagent-program-" + MARK).encode()
    for _ in range(2000):
        for p in os.listdir("/proc"):
            if not p.isdigit() or int(p) == os.getpid():
                continue
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    if want in f.read().split(b"\0"):
                        return int(p)
            except OSError:
                pass
        time.sleep(0.005)
    return 0

def read_first(paths):
    for p in paths:
        try:
            with open(p) as f:
                return f.read()
        except OSError:
            pass
    return ""

def cgroup():
    """CPU time (ns), peak memory and OOM kills of the container's cgroup."""
    cpu, peak, oom = 0, 0, -1
    v = read_first(["/sys/fs/cgroup/cpuacct/cpuacct.usage", "/sys/fs/cgroup/cpu,cpuacct/cpuacct.usage"])
    if v.strip():
        cpu = int(v)
    else:
        for line in read_first(["/sys/fs/cgroup/cpu.stat"]).splitlines():
            if line.startswith("usage_usec "):
                cpu = int(line.split()[1]) * 1000
    v = read_first(["/sys/fs/cgroup/memory/memory.max_usage_in_bytes", "/sys/fs/cgroup/memory.peak"])
    if v.strip():
        peak = int(v)
    for line in read_first(["/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"]).splitlines():
        if line.startswith("oom_kill "):
            oom = int(line.split()[1])
    return cpu, peak, oom

def own_cpu():
    t = os.times()
    return int((t.user + t.system) * 1e9)

def walk(top, limit=200000):
    """Yields (rel, lstat) below top, without following links."""
    stack, n = [""], 0
    while stack:
        rel = stack.pop()
        try:
            it = os.scandir(os.path.join(top, rel) if rel else top)
        except OSError:
            continue
        with it:
            for e in it:
                n += 1
                if n > limit:
                    return
                r = rel + "/" + e.name if rel else e.name
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                yield r, st
                if stat.S_ISDIR(st.st_mode):
                    stack.append(r)

def cost(st):
    """An entry's charge, as the other backends' disk watcher (diskwatch)
    charges it: its blocks and an inode, a regular file at least its size
    rounded up to a block (a shared mapping can fill it without a write)."""
    c = st.st_blocks * 512
    if stat.S_ISREG(st.st_mode):
        c = max(c, (st.st_size + 4095) & ~4095)
    return c + 256

def usage():
    return sum(cost(st) for _, st in walk(WS))

def stamp(st):
    return (st.st_ino, st.st_ctime_ns, st.st_size, st.st_mode)

def stage(hdr):
    """Applies entry frames until 'S'; returns the snapshot of the workspace."""
    dirs, cur = [], None  # cur: the open file being written and its mode

    def done():
        # A mode without the owner's write bit is set once the chunks are
        # written; others were given at creation (the umask is 0).
        if cur is not None:
            if cur[1] & 0o200 == 0:
                os.fchmod(cur[0], cur[1] & 0o777)
            os.close(cur[0])

    while True:
        t, p = recv()
        if t != b"C":
            done()
            cur = None
        if t == b"S":
            break
        if t == b"D":
            mode, rel = struct.unpack(">I", p[:4])[0], p[4:].decode()
            os.makedirs(os.path.join(WS, rel), exist_ok=True)
            dirs.append((rel, mode))
        elif t in (b"W", b"P"):
            mode, size = struct.unpack(">IQ", p[:12])
            path = p[12:].decode()
            path = os.path.join(WS, path) if t == b"W" else path
            if t == b"P":
                os.makedirs(os.path.dirname(path), exist_ok=True)
            create = (mode & 0o777) if mode & 0o200 else 0o600
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, create)
            if size:
                os.ftruncate(fd, size)
            cur = (fd, mode)
        elif t == b"C" and cur is not None:
            os.pwrite(cur[0], p[8:], struct.unpack(">Q", p[:8])[0])
        elif t == b"L":
            n = struct.unpack(">H", p[:2])[0]
            os.symlink(p[2 + n:].decode(), os.path.join(WS, p[2:2 + n].decode()))
    for rel, mode in reversed(dirs):
        os.chmod(os.path.join(WS, rel), mode & 0o777)
    if os.path.isdir("/code"):
        for rel, st in walk("/code"):
            os.chmod(os.path.join("/code", rel), 0o555 if stat.S_ISDIR(st.st_mode) else 0o444)
    return {rel: stamp(st) for rel, st in walk(WS)}

def watch(hdr, pidfd):
    """Waits for the program's end, a kill, the disk limit or the deadline;
    returns why, and the workspace's charge at the start."""
    base = usage()
    deadline = time.monotonic() + hdr.get("deadline_ms", 60000) / 1000
    poll, nextpoll = hdr.get("poll_ms", 50) / 1000, 0
    fds = [0] + ([pidfd] if pidfd >= 0 else [])
    while True:
        now = time.monotonic()
        if now >= deadline:
            return "deadline", base
        if now >= nextpoll:
            t0 = time.monotonic()
            if usage() - base > hdr.get("disk", 1 << 62):
                return "disk", base
            nextpoll = time.monotonic() + max(poll, 3 * (time.monotonic() - t0))
        r = [0] if buffered() >= 5 else select.select(fds, [], [], max(0, min(deadline, nextpoll) - time.monotonic()))[0]
        if pidfd in r:
            return "exit", base
        if 0 in r:
            try:
                t, p = recv()
            except EOFError:
                return "cancel", base
            if t == b"K":
                return p.decode() or "kill", base

def killall():
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    me = os.getpid()
    for _ in range(200):
        left = []
        for p in os.listdir("/proc"):
            if p.isdigit() and int(p) not in (1, me):
                try:
                    with open("/proc/%s/stat" % p) as f:
                        if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                            left.append(p)
                except (OSError, IndexError):
                    pass
        if not left:
            return
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        time.sleep(0.005)

def data_ranges(fd, size):
    off = 0
    while off < size:
        try:
            start = os.lseek(fd, off, os.SEEK_DATA)
            end = os.lseek(fd, start, os.SEEK_HOLE)
        except OSError:
            if off == 0:
                start, end = 0, size
            else:
                return
        yield start, min(end, size)
        off = end

def send_back(snap, cap):
    sent = 0
    for rel, st in walk(WS):
        b = rel.encode()
        if rel in snap and snap[rel] == stamp(st) and not stat.S_ISDIR(st.st_mode):
            send(b"U", b, False)
        elif stat.S_ISDIR(st.st_mode):
            send(b"D", struct.pack(">I", st.st_mode & 0o777) + b, False)
        elif stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(os.path.join(WS, rel)).encode()
            except OSError:
                continue
            send(b"L", struct.pack(">H", len(b)) + b + target, False)
        elif stat.S_ISREG(st.st_mode):
            try:
                fd = os.open(os.path.join(WS, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                send(b"W", struct.pack(">IQQ", st.st_mode & 0o777, st.st_size, st.st_blocks) + b, False)
                for start, end in data_ranges(fd, st.st_size):
                    while start < end and sent <= cap:
                        chunk = os.pread(fd, min(256 << 10, end - start), start)
                        if not chunk:
                            break
                        if chunk.count(0) != len(chunk):
                            send(b"C", struct.pack(">Q", start) + chunk, False)
                            sent += len(chunk)
                        start += len(chunk)
                send(b"F", b"", False)
            finally:
                os.close(fd)

def main():
    os.umask(0)
    try:
        import ctypes
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no /proc/PID/fd or mem for the program
    except Exception:
        pass
    if RECOVER:
        t, p = recv()
        hdr = json.loads(p)
        killall()
        cpu, peak, oom = cgroup()
        sendj(b"E", {"reason": "recover", "cpu_ns": cpu, "peak": peak, "oom": oom})
        send_back({}, hdr.get("cap", 1 << 62))
        send(b"Z")
        return
    pid = find_program()
    pidfd = -1
    if pid:
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            pid = 0
    sendj(b"A", {"pid": pid})
    t, p = recv()
    hdr = json.loads(p)
    snap = stage(hdr)
    cpu0, _, oom0 = cgroup()
    self0 = own_cpu()
    sendj(b"B", {"pid": pid})
    reason, base = watch(hdr, pidfd)
    killall()
    if reason == "exit" and usage() - base > hdr.get("disk", 1 << 62):
        reason = "disk"  # it ended before a poll saw the growth
    cpu, peak, oom = cgroup()
    cpu = max(0, cpu - cpu0 - (own_cpu() - self0))
    sendj(b"E", {"reason": reason, "cpu_ns": cpu, "peak": peak, "oom": (oom - oom0) if oom >= 0 and oom0 >= 0 else -1})
    send_back(snap, hdr.get("cap", 1 << 62))
    send(b"Z")

try:
    main()
except (EOFError, BrokenPipeError):
    pass
except Exception as e:
    try:
        sendj(b"X", {"error": "%s: %s" % (type(e).__name__, e)})
    except Exception:
        pass
    sys.exit(1)
