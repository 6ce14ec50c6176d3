# codeagent's kernel: a Python interpreter that runs code cells one after
# another in one namespace, Jupyter-style (see kernel.go for the host side).
#
# It runs as the program of a sandbox. Its stdin and stdout are the
# protocol: one JSON object per line each way. Requests are
#   {"op": "exec", "id": ID, "code": CODE, "stdin": TEXT}
#   {"op": "interrupt", "id": ID}
# and replies, for the cell ID under way,
#   {"t": "stream", "id": ID, "name": "stdout"|"stderr", "data": BASE64}
#   {"t": "display", "id": ID, "kind": "result"|"display"|"figure", "data": {MIME: VALUE}, "file": NAME}
#   {"t": "error", "id": ID, "ename": NAME, "evalue": TEXT}
#   {"t": "done", "id": ID, "status": "ok"|"error"|"exit"|"interrupted", "exit_code": N, "count": N}
# after {"t": "ready"} once at start. File descriptors 1 and 2 are pipes
# that the kernel reads, so that the output of subprocesses and of C code
# is captured too; 0 is /dev/null and a cell's stdin is a string.
#
# The host trusts none of this: the cell's code can rewrite the kernel,
# write to the protocol, or stop answering. The host bounds every message
# and every wait, and the sandbox bounds the rest.

import ast
import base64
import builtins
import io
import json
import linecache
import os
import queue
import signal
import sys
import threading
import traceback
import types

_KERNEL = __file__
_MAX_TEXT = 1 << 20  # a text/plain or text/html value, in characters
_MAX_PNG = 8 << 20
_MAX_IDLE_OUTPUT = 1 << 20  # output written between cells, kept for the next one
_MAX_REQUEST = 64 << 20

_proto_in = os.dup(0)
_proto_out = os.dup(1)
os.set_inheritable(_proto_in, False)
os.set_inheritable(_proto_out, False)
_null = os.open(os.devnull, os.O_RDONLY)
os.dup2(_null, 0)
os.close(_null)

_send_lock = threading.Lock()


def _send(msg):
    line = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
    with _send_lock:
        view = memoryview(line)
        while view:
            n = os.write(_proto_out, view)
            view = view[n:]


# The cell under way, or None between cells; output read while none runs
# waits for the next one.
_state = {"id": None, "interruptible": False}
_state_lock = threading.Lock()
_idle_output = []  # (name, bytes)
_idle_size = [0]
_sentinel = base64.b16encode(os.urandom(16))


class _Capture:
    """Reads what is written to fd (1 or 2) and sends it as the current
    cell's output. A sentinel written at the end of a cell marks where its
    output ends: everything before it has been read."""

    def __init__(self, fd, name):
        self.name = name
        r, w = os.pipe()
        os.dup2(w, fd)
        os.close(w)
        os.set_inheritable(r, False)
        self.r = r
        self.fd = fd
        self.seen = threading.Event()
        threading.Thread(target=self.loop, daemon=True, name="capture-" + name).start()

    def deliver(self, data):
        if not data:
            return
        with _state_lock:
            cid = _state["id"]
            if cid is None:
                if _idle_size[0] < _MAX_IDLE_OUTPUT:
                    _idle_output.append((self.name, data[: _MAX_IDLE_OUTPUT - _idle_size[0]]))
                    _idle_size[0] += len(data)
                return
        _send({"t": "stream", "id": cid, "name": self.name, "data": base64.b64encode(data).decode()})

    def loop(self):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        tail = b""
        while True:
            try:
                data = os.read(self.r, 65536)
            except InterruptedError:
                continue
            if not data:
                return
            data = tail + data
            i = data.find(_sentinel)
            if i >= 0:
                self.deliver(data[:i])
                tail = data[i + len(_sentinel):]
                self.seen.set()
                continue
            keep = len(_sentinel) - 1
            self.deliver(data[:-keep] if len(data) > keep else b"")
            tail = data[-keep:] if len(data) > keep else data

    def drain(self):
        """Waits until everything written to the fd so far was delivered."""
        self.seen.clear()
        try:
            os.write(self.fd, _sentinel)
        except OSError:
            return
        self.seen.wait(1.0)


def _flush_std():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass


_captures = [_Capture(1, "stdout"), _Capture(2, "stderr")]
_requests = queue.Queue()
_main_thread = threading.main_thread().ident


def _reader():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    f = os.fdopen(_proto_in, "rb", buffering=1 << 16)
    while True:
        line = f.readline(_MAX_REQUEST)
        if not line:
            _requests.put(None)
            return
        if not line.endswith(b"\n"):
            os._exit(125)  # a request larger than allowed: the host does not send one
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("op") == "interrupt":
            with _state_lock:
                if _state["id"] == msg.get("id") and _state["interruptible"]:
                    signal.pthread_kill(_main_thread, signal.SIGINT)
        elif msg.get("op") == "exec":
            _requests.put(msg)


def _truncate(s, n):
    return s if len(s) <= n else s[:n] + "\n[... %d more characters]" % (len(s) - n)


def _bundle(value):
    """The MIME bundle of a value, as Jupyter's display data."""
    try:
        text = repr(value)
    except Exception as e:
        text = "<repr failed: %s>" % type(e).__name__
    data = {"text/plain": _truncate(text, _MAX_TEXT)}
    for mime, method in (("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"),
                         ("image/svg+xml", "_repr_svg_"), ("image/png", "_repr_png_")):
        try:
            fn = getattr(value, method, None)
            if isinstance(value, type) or not callable(fn):
                continue
            r = fn()
        except Exception:
            continue
        if mime == "image/png":
            if isinstance(r, (bytes, bytearray)) and len(r) <= _MAX_PNG:
                data[mime] = base64.b64encode(r).decode()
        elif isinstance(r, str):
            data[mime] = _truncate(r, _MAX_TEXT)
    return data


def display(*values):
    """Shows each value below the cell, as its MIME bundle."""
    with _state_lock:
        cid = _state["id"]
    if cid is None:
        return
    _flush_std()
    for v in values:
        _send({"t": "display", "id": cid, "kind": "display", "data": _bundle(v)})


def _figures(cid):
    """Saves the figures left open as PNG in the workspace, shows them and
    closes them."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    names = []
    try:
        nums = plt.get_fignums()
    except Exception:
        return names
    for num in nums:
        try:
            buf = io.BytesIO()
            plt.figure(num).savefig(buf, format="png")
            png = buf.getvalue()
        except Exception as e:
            sys.stderr.write("figure %s could not be saved: %s\n" % (num, e))
            continue
        name = None
        for n in range(1, 100000):
            candidate = "figure-%d.png" % n
            try:
                with open(os.path.join("/workspace", candidate), "xb") as f:
                    f.write(png)
                name = candidate
                break
            except FileExistsError:
                continue
            except OSError as e:
                sys.stderr.write("figure %s could not be written: %s\n" % (num, e))
                break
        msg = {"t": "display", "id": cid, "kind": "figure", "data": {"text/plain": "<Figure %s>" % num}}
        if len(png) <= _MAX_PNG:
            msg["data"]["image/png"] = base64.b64encode(png).decode()
        if name:
            msg["file"] = name
            names.append(name)
        _send(msg)
    try:
        plt.close("all")
    except Exception:
        pass
    return names


def _cut(tb):
    while tb is not None and tb.tb_frame.f_code.co_filename == _KERNEL:
        tb = tb.tb_next
    return tb


def _report(e):
    tb = _cut(e.__traceback__)
    text = "".join(traceback.format_exception(type(e), e, tb))
    sys.stderr.write(text)
    _send({"t": "error", "id": _state["id"], "ename": type(e).__name__, "evalue": _truncate(str(e), 4096)})


# Cells import from the working directory (the workspace), as Python's
# own interactive prompt and Jupyter do, not from this file's directory.
if sys.path and sys.path[0] == os.path.dirname(_KERNEL):
    sys.path[0] = ""

_count = [0]
_main = types.ModuleType("__main__")
_ns = _main.__dict__
_ns.update({"__builtins__": builtins, "display": display})
sys.modules["__main__"] = _main


def _run(msg):
    code = msg.get("code", "")
    _count[0] += 1
    filename = "<cell %d>" % _count[0]
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    sys.stdin = io.StringIO(msg.get("stdin") or "")
    status, exit_code = "ok", 0
    try:
        tree = ast.parse(code, filename, "exec")
    except SyntaxError as e:
        e.__traceback__ = None  # as Python shows it: where, not how
        _report(e)
        return "error", 1
    try:
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        with _state_lock:
            _state["interruptible"] = True
        exec(compile(tree, filename, "exec"), _ns)
        if last is not None:
            value = eval(compile(last, filename, "eval"), _ns)
            if value is not None:
                _ns["_"] = value
                _flush_std()
                _send({"t": "display", "id": _state["id"], "kind": "result", "data": _bundle(value)})
    except SystemExit as e:
        c = e.code
        if c is None:
            exit_code = 0
        elif isinstance(c, int):
            exit_code = c & 0xFF
        else:
            sys.stderr.write(str(c) + "\n")
            exit_code = 1
        status = "exit"
    except KeyboardInterrupt as e:
        status, exit_code = "interrupted", 130
        _report(e)
    except BaseException as e:
        status, exit_code = "error", 1
        _report(e)
    finally:
        with _state_lock:
            _state["interruptible"] = False
        sys.stdin = io.StringIO("")
    return status, exit_code


def _cell(msg):
    cid = msg.get("id")
    with _state_lock:
        _state["id"] = cid
        idle = list(_idle_output)
        _idle_output.clear()
        _idle_size[0] = 0
    for name, data in idle:
        _send({"t": "stream", "id": cid, "name": name, "data": base64.b64encode(data).decode()})
    status, exit_code = "interrupted", 130
    try:
        status, exit_code = _run(msg)
        _figures(cid)
    except KeyboardInterrupt:
        pass
    _flush_std()
    for c in _captures:
        c.drain()
    with _state_lock:
        _state["id"] = None
    _send({"t": "done", "id": cid, "status": status, "exit_code": exit_code, "count": _count[0]})


def _preload():
    import numpy as np
    import pandas as pd
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    _ns.update({"np": np, "pd": pd, "plt": plt})


def _serve():
    threading.Thread(target=_reader, daemon=True, name="requests").start()
    if "--preload" in sys.argv[1:]:
        _preload()
    os.chdir("/workspace")
    _send({"t": "ready", "preloaded": "pd" in _ns})
    while True:
        try:
            msg = _requests.get()
        except KeyboardInterrupt:
            continue  # an interrupt that came too late for its cell
        if msg is None:
            _flush_std()
            os._exit(0)
        try:
            _cell(msg)
        except KeyboardInterrupt:
            with _state_lock:
                _state["id"] = None
            _send({"t": "done", "id": msg.get("id"), "status": "interrupted", "exit_code": 130, "count": _count[0]})


_serve()
