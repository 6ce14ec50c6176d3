# codeagent's runner of Python programs with execution traces (trace.go):
# python3 -c THIS FILE ARGS... runs FILE as `python3 FILE ARGS` does (as
# __main__, with its argv, __file__, sys.path[0], traceback and exit
# status) and, when it dies of an uncaught exception, writes after the
# traceback the values its last frames held, between marker lines that
# carry the run's key (lang.TraceKey): the first line of stdin, which it
# reads before FILE's code runs (the rest of stdin is FILE's). A run that
# succeeds pays for the little code before _TRACE only: FILE is run by
# exec, whose compiler, unlike compile()'s, does not first set up the ast
# module (2 ms), and its code is then given FILE's name.
import sys


def _start():
    import os, _imp
    key = b""  # its line, read exactly: 32 hex digits and a newline
    try:
        while len(key) < 33:
            b = os.read(0, 33 - len(key))
            if not b:
                break
            key += b
    except OSError:
        pass
    key = key[:32].decode() if key[32:] == b"\n" and key[:32].isalnum() else ""
    path = os.path.abspath(sys.argv[1])  # as the interpreter makes __file__
    sys.argv = sys.argv[1:]
    sys.orig_argv = sys.orig_argv[:len(sys.orig_argv) - len(sys.argv) - 2] + sys.argv
    sys.path[0] = os.path.dirname(os.path.realpath(path))
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        sys.stderr.write("%s: can't open file %r: [Errno %d] %s\n" % (sys.orig_argv[0], path, e.errno, e.strerror))
        raise SystemExit(2)
    main = type(sys)("__main__")
    main.__annotations__, main.__builtins__, main.__file__, main.__cached__ = {}, sys.modules["builtins"], path, None
    main.__loader__ = sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", path)
    sys.modules["__main__"] = main
    previous = sys.excepthook
    # The program's own files: those beside it, or in its working
    # directory when it lies below it (a folder's modules, codeagent's
    # program in .codeagent/).
    top = os.path.dirname(path) + "/"
    cwd = os.getcwd().rstrip("/") + "/"
    if path.startswith(cwd):
        top = cwd

    def hook(t, v, tb):
        while tb is not None and tb.tb_frame.f_globals is _G:  # the runner's frames
            tb = tb.tb_next
        sys.last_traceback = tb
        if v is not None:
            v.__traceback__ = tb
        previous(t, v, tb)
        if key and isinstance(v, Exception) and tb is not None:
            # Not for a KeyboardInterrupt: exec(str) clears the interpreter's
            # note of one, which makes it die of SIGINT at exit.
            try:
                g = {}
                exec(_TRACE, g)
                g["write"](g["trace"](tb, top, path), key)
            except BaseException:
                pass

    def name(frame, event, arg):  # gives FILE's code its name as it starts
        if event == "call" and frame.f_globals is main.__dict__:
            sys.setprofile(None)
            _imp._fix_co_filename(frame.f_code, path)
    sys.excepthook = hook
    sys.setprofile(name)
    try:
        exec(source, main.__dict__)
    except SyntaxError as e:
        if e.__traceback__.tb_next is None and e.filename == "<string>":  # FILE's own
            e.filename = path
        raise
    finally:
        if sys.getprofile() is name:
            sys.setprofile(None)


_TRACE = r'''
import sys
MARK = "==== codeagent trace"  # lang.TraceMark
FRAMES, NAMES, CHARS, BYTES = 3, 20, 200, 16384


def write(text, key):
    import os
    if not text:
        return
    try:
        sys.stderr.flush()
    except Exception:
        pass
    data = ("\n%s %s ====\n%s%s %s end ====\n" % (MARK, key, text, MARK, key)).encode("utf-8", "backslashreplace")
    while data:
        data = data[os.write(2, data):]


def trace(tb, top, path):
    import reprlib, signal, time, types
    frames = []
    while tb is not None:
        f = tb.tb_frame
        name = f.f_code.co_filename
        if name.startswith(top) and "-packages/" not in name:  # the program's own files
            frames.append((f, tb.tb_lineno))
        tb = tb.tb_next
    skip = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)

    class Slow(Exception):
        pass

    class R(reprlib.Repr):
        def repr_instance(self, x, level):
            if type(x).__name__ == "DataFrame" and hasattr(x, "columns"):
                return "<DataFrame, %d rows, columns %s>" % (len(x), self.repr1(list(x.columns), level))
            return cut(repr(x))

    r = R()
    r.maxstring = r.maxother = r.maxlong = CHARS
    r.maxlist = r.maxtuple = r.maxset = r.maxfrozenset = r.maxdeque = r.maxarray = 20
    r.maxdict = 10

    def cut(s):
        if "\n" in s:  # one line a value (a string's repr has no newline)
            s = " ".join(s.split())
        return s if len(s) <= CHARS else s[:CHARS - 3] + "..."

    def show(v):
        try:
            if old is not None:
                signal.setitimer(signal.ITIMER_REAL, 0.05)
            try:
                return cut(r.repr(v))
            finally:
                if old is not None:
                    signal.setitimer(signal.ITIMER_REAL, 0)
        except Slow:
            return "<repr took too long>"
        except BaseException as e:
            try:
                return cut("<repr raised %s: %s>" % (type(e).__name__, e))
            except BaseException:
                return "<repr raised %s>" % type(e).__name__

    def alarm(*_):
        raise Slow()

    try:
        old = signal.signal(signal.SIGALRM, alarm), signal.setitimer(signal.ITIMER_REAL, 0)
    except ValueError:  # not the main thread: no clock
        old = None
    deadline = time.monotonic() + 0.25
    out, size = [], 0
    try:
        for f, line in frames[-FRAMES:]:
            code = f.f_code
            where = "<module>" if code.co_name == "<module>" else getattr(code, "co_qualname", code.co_name) + "()"
            if code.co_filename != path:
                where += " in " + code.co_filename[len(top):]
            names = [(k, v) for k, v in list(f.f_locals.items())
                     if not (k[:2] == "__" and k[-2:] == "__") and not isinstance(v, skip)]
            if not names:
                continue  # a frame of only functions, classes and modules
            lines = ["in %s, line %d:" % (where, line)]
            for k, v in names[:NAMES]:
                if time.monotonic() > deadline:
                    lines.append("    (no time left for more values)")
                    break
                lines.append("    %s = %s" % (k[:60], show(v)))
            else:
                if len(names) > NAMES:
                    lines.append("    ... and %d more names" % (len(names) - NAMES))
            for l in lines:
                size += len(l.encode("utf-8", "backslashreplace")) + 1
                if size > BYTES:
                    out.append("(trace cut at %d bytes)" % BYTES)
                    return "\n".join(out) + "\n"
                out.append(l)
    finally:
        if old is not None:
            signal.signal(signal.SIGALRM, old[0])
            if old[1][0]:
                signal.setitimer(signal.ITIMER_REAL, *old[1])
    return "\n".join(out) + "\n" if out else ""
'''
_G = globals()
_start()
