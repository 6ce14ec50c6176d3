# codeagent's HumanEval scoring harness, run by eval/score.go in the sandbox:
#
#     python3 /code/harness.py ENTRY_POINT TIMEOUT_SECONDS
#
# with the task's prompt, the answer and the test code in /code (read-only)
# and a per-run secret on standard input. It decides which program to
# score (the answer alone when it binds every top-level name the prompt
# binds, else prompt + answer as the reference harness builds it), runs it
# with the test code and check(ENTRY_POINT) in one namespace, within the
# time limit, with the solution's output swallowed, and reports on a
# descriptor of its own:
#
#     form module|completion
#     <the secret>                     only when check returned
#     failed: <exception> / timed out  otherwise, then the traceback and
#                                      the head and tail of the output
#
# The secret is read from standard input only after check has returned,
# so that a solution which prints a verdict and exits (or exits before
# check ran) cannot pass. Solution code runs in this interpreter and can
# still reach this process's descriptors; the sandbox bounds what it does.
import ast
import builtins
import io
import os
import signal
import sys

CHANNEL_LIMIT = 8192  # bytes of captured output reported, head and tail each


def bound_names(source):
    """Top-level names a module binds (raises SyntaxError)."""
    names = set()

    def visit(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    names.add(alias.asname or alias.name.split(".")[0])
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for sub in ast.walk(target):
                        if isinstance(sub, ast.Name):
                            names.add(sub.id)
            for field in ("body", "orelse", "finalbody"):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    inner = getattr(node, field, None)
                    if isinstance(inner, list):
                        visit(inner)
            for handler in getattr(node, "handlers", None) or []:
                visit(handler.body)

    visit(ast.parse(source).body)
    return names


def choose_form(prompt, answer):
    try:
        if bound_names(prompt) <= bound_names(answer):
            return "module"
    except (SyntaxError, ValueError):
        pass
    return "completion"


class Capture(io.TextIOBase):
    """Keeps the head and the tail of what is written; reading fails."""

    def __init__(self):
        self.head, self.tail, self.dropped = [], [], 0
        self.size = 0

    def writable(self):
        return True

    def readable(self):
        return False

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not " + type(s).__name__)
        n = len(s)
        if self.size < CHANNEL_LIMIT:
            self.head.append(s[: CHANNEL_LIMIT - self.size])
            s = s[CHANNEL_LIMIT - self.size :]
            self.size += len(self.head[-1])
        if s:
            self.tail.append(s[-CHANNEL_LIMIT:])
            if len(self.tail) > 64:
                joined = "".join(self.tail)
                self.dropped += max(0, len(joined) - CHANNEL_LIMIT)
                self.tail = [joined[-CHANNEL_LIMIT:]]
        return n

    def text(self):
        tail = "".join(self.tail)
        if len(tail) > CHANNEL_LIMIT:
            self.dropped += len(tail) - CHANNEL_LIMIT
            tail = tail[-CHANNEL_LIMIT:]
        if self.dropped:
            return "".join(self.head) + "\n[... %d characters left out ...]\n" % self.dropped + tail
        return "".join(self.head) + tail

    def read(self, *args, **kwargs):
        raise IOError

    def readline(self, *args, **kwargs):
        raise IOError

    def readlines(self, *args, **kwargs):
        raise IOError


class TimedOut(Exception):
    pass


def on_alarm(signum, frame):
    raise TimedOut("Timed out!")


# What the reference harness disables before it runs a sample; the same
# calls fail here, so that both harnesses agree on a sample that uses them.
# This is not a security measure: the sandbox is.
DISABLED = {
    "builtins": ["exit", "quit", "help"],
    "os": ["kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork", "forkpty",
           "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown",
           "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir"],
    "shutil": ["rmtree", "move", "chown"],
    "subprocess": ["Popen"],
}
UNIMPORTABLE = ["ipdb", "joblib", "resource", "psutil", "tkinter"]


def disable():
    import faulthandler
    import shutil
    import subprocess

    faulthandler.disable()
    os.environ["OMP_NUM_THREADS"] = "1"
    modules = {"builtins": builtins, "os": os, "shutil": shutil, "subprocess": subprocess}
    for module, attrs in DISABLED.items():
        for attr in attrs:
            setattr(modules[module], attr, None)
    for name in UNIMPORTABLE:
        sys.modules[name] = None


def main():
    entry, timeout = sys.argv[1], float(sys.argv[2])
    with open("/code/prompt.py", encoding="utf-8") as f:
        prompt = f.read()
    with open("/code/answer.py", encoding="utf-8") as f:
        answer = f.read()
    with open("/code/test.py", encoding="utf-8") as f:
        test = f.read()
    write, read, exit_now = os.write, os.read, os._exit

    # Our own descriptors: the report channel and the secret; the standard
    # ones go to /dev/null for the solution and whatever it starts.
    channel, secret_fd = os.dup(1), os.dup(0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)

    def report(text):
        data = text.encode("utf-8", "replace")
        while data:
            data = data[write(channel, data):]

    form = choose_form(prompt, answer)
    report("form %s\n" % form)
    # The parts are compiled apart, so that an answer cannot swallow the
    # test code into a string or a comment.
    parts = [("solution.py", answer if form == "module" else prompt + answer), ("test.py", test),
             ("check.py", "check(%s)\n" % entry)]

    import linecache
    import traceback

    for name, source in parts:
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    capture = Capture()
    disable()
    sys.stdout = sys.stderr = capture
    sys.stdin = capture
    signal.signal(signal.SIGALRM, on_alarm)
    error = None
    try:
        codes = [compile(source, name, "exec") for name, source in parts]
        namespace = {}
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            for code in codes:
                exec(code, namespace)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        outcome = "passed"
    except TimedOut:
        outcome = "timed out"
    except BaseException as e:  # SystemExit too: exiting is not passing
        outcome = "failed: %s" % (e,)
        error = e
    if outcome == "passed":
        secret = b""
        while len(secret) < 64:
            chunk = read(secret_fd, 64 - len(secret))
            if not chunk:
                break
            secret += chunk
        report("\n" + secret.decode("ascii", "replace").strip() + "\n")
        exit_now(0)
    lines = ["result: " + outcome.replace("\n", " ")]
    if error is not None:
        try:
            lines.append("".join(traceback.format_exception(type(error), error, error.__traceback__)).rstrip())
        except BaseException:
            lines.append("%s: %s" % (type(error).__name__, error))
    out = capture.text().strip()
    if out:
        lines.append("output:\n" + out)
    report("\n".join(lines) + "\n")
    exit_now(1)


main()
