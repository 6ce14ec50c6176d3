# codeagent's HumanEval scoring harness, run by eval/score.go in the sandbox:
#
#     python3 -S /code/harness.py ENTRY_POINT TIMEOUT_SECONDS
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
#
# It starts without the site module (-S), which costs more than a sample's
# run, and puts the site directories on sys.path itself, with the paths
# their .pth files add (their import lines are not run). Modules are
# imported only as needed, for the same reason.
import _ast
import _signal  # signal without its enum wrappers, a third of the start-up
import builtins
import io
import os
import sys

CHANNEL_LIMIT = 8192  # bytes of captured output reported, head and tail each


def bound_names(source):
    """Top-level names a module binds (raises SyntaxError)."""
    names = set()
    scopes = (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef)

    def targets(node):
        if isinstance(node, _ast.Name):
            names.add(node.id)
        elif isinstance(node, (_ast.Tuple, _ast.List)):
            for elt in node.elts:
                targets(elt)
        elif isinstance(node, _ast.Starred):
            targets(node.value)

    def visit(body):
        for node in body:
            if isinstance(node, scopes):
                names.add(node.name)
                continue
            if isinstance(node, (_ast.Import, _ast.ImportFrom)):
                for alias in node.names:
                    names.add(alias.asname or alias.name.split(".")[0])
            elif isinstance(node, _ast.Assign):
                for target in node.targets:
                    targets(target)
            elif isinstance(node, (_ast.AnnAssign, _ast.AugAssign)):
                targets(node.target)
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    visit(inner)
            for handler in getattr(node, "handlers", None) or []:
                visit(handler.body)

    visit(compile(source, "answer.py", "exec", _ast.PyCF_ONLY_AST).body)
    return names


def add_site_dirs():
    """What site does for sys.path, without running .pth import lines."""
    import site

    for d in site.getsitepackages():
        if not os.path.isdir(d) or d in sys.path:
            continue
        sys.path.append(d)
        for name in sorted(os.listdir(d)):
            if not name.endswith(".pth"):
                continue
            try:
                with open(os.path.join(d, name), encoding="utf-8") as f:
                    for line in f:
                        line = line.rstrip()
                        if not line or line.startswith(("#", "import ", "import\t")):
                            continue
                        p = os.path.join(d, line)
                        if os.path.isdir(p) and p not in sys.path:
                            sys.path.append(p)
            except OSError:
                pass


def choose_form(prompt, answer):
    try:
        if bound_names(prompt) <= bound_names(answer):
            return "module"
    except (SyntaxError, ValueError, TypeError):
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


class DisablingLoader:
    """Loads a module, then sets the attributes the reference disables to None."""

    def __init__(self, loader, attrs):
        self.loader, self.attrs = loader, attrs

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        for attr in self.attrs:
            setattr(module, attr, None)


class Disabler:
    """Applies DISABLED to shutil and subprocess when they are imported."""

    def find_spec(self, name, path=None, target=None):
        if name not in ("shutil", "subprocess"):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = DisablingLoader(spec.loader, DISABLED[name])
                return spec
        return None


def disable():
    import faulthandler

    faulthandler.disable()
    os.environ["OMP_NUM_THREADS"] = "1"
    for module, attrs in (("builtins", builtins), ("os", os)):
        for attr in DISABLED[module]:
            setattr(attrs, attr, None)
    for module in ("shutil", "subprocess"):
        if module in sys.modules:
            for attr in DISABLED[module]:
                setattr(sys.modules[module], attr, None)
    sys.meta_path.insert(0, Disabler())
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
    add_site_dirs()

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

    capture = Capture()
    disable()
    sys.stdout = sys.stderr = capture
    sys.stdin = capture
    _signal.signal(_signal.SIGALRM, on_alarm)
    error = None
    try:
        codes = [compile(source, name, "exec") for name, source in parts]
        namespace = {}
        _signal.setitimer(_signal.ITIMER_REAL, timeout)
        try:
            for code in codes:
                exec(code, namespace)
        finally:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
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
            import linecache
            import traceback

            for name, source in parts:
                linecache.cache[name] = (len(source), None, source.splitlines(True), name)
            lines.append("".join(traceback.format_exception(type(error), error, error.__traceback__)).rstrip())
        except BaseException:
            lines.append("%s: %s" % (type(error).__name__, error))
    out = capture.text().strip()
    if out:
        lines.append("output:\n" + out)
    report("\n".join(lines) + "\n")
    exit_now(1)


main()
