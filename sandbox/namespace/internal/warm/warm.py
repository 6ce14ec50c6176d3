# codeagent's warm interpreter (see package warm, and warm_linux.go in
# package namespace).
#
# It runs in a sandbox that is fully set up but has no workspace yet: it
# imports the scientific stack with its output sent to /dev/null, writes
# "ready" on stdout, and blocks reading one request from stdin. Meanwhile
# codeagent attaches the execution's workspace at /workspace and its files
# at /code, sets the limits, and writes the request: a decimal length, a
# newline, and as much JSON: the interpreter's arguments (what follows
# "python3" on a command line), the environment and the directory. What
# follows on stdin is the program's. The program then runs as it would
# under `python3 FILE` (or -m MODULE, or -c CODE): as __main__, with its
# argv, its directory first on sys.path, its file name in tracebacks (the
# frames of this file are cut off), sys.exit, uncaught exceptions and
# KeyboardInterrupt (death by SIGINT) handled as the interpreter does, then
# threads joined and atexit callbacks run as at any exit (see _finish).
#
# Nothing here is trusted by the host: the program can read this file and
# do anything the sandbox allows, and that is all.

import os
import sys

_inherited = [int(n) for n in os.listdir("/proc/self/fd") if int(n) > 2]


def _read_exactly(n):
    chunks = []
    while n > 0:
        b = os.read(0, min(n, 1 << 16))
        if not b:
            os._exit(125)
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def _warm_up():
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    failed = ""
    try:
        import numpy  # noqa: F401
        import pandas  # noqa: F401
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401
    except BaseException as e:  # reported to the host, which then runs cold
        failed = repr(e)
    import gc
    gc.collect()
    gc.freeze()  # the program's collections skip what the warm-up made
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    os.dup2(saved[0], 1)
    os.dup2(saved[1], 2)
    os.close(saved[0])
    os.close(saved[1])
    os.write(1, ("ready\n" if not failed else "failed " + failed[:200] + "\n").encode())
    if failed:
        os._exit(125)
    length = b""
    while not length.endswith(b"\n"):
        if len(length) > 12:
            os._exit(125)
        length += _read_exactly(1)
    data = _read_exactly(int(length))
    for fd in _inherited:
        try:
            os.close(fd)
        except OSError:
            pass
    import json
    return json.loads(data)


def _prepare(req):
    os.environ.clear()
    os.environ.update(req["env"])
    os.chdir(req["cwd"])
    args = req["argv"]
    sys.orig_argv = sys.orig_argv[:1] + args
    import types
    main = types.ModuleType("__main__")
    main.__annotations__ = {}
    main.__builtins__ = sys.modules["builtins"]
    if args[0] == "-m":
        sys.argv = ["-m"] + args[2:]  # runpy puts the module's file first
        sys.path[0] = os.getcwd()
        sys.modules["__main__"] = main  # runpy runs the module in it
        return "module", args[1], main
    if args[0] == "-c":
        sys.argv = ["-c"] + args[2:]
        sys.path[0] = ""
        from importlib.machinery import BuiltinImporter
        main.__loader__ = BuiltinImporter
        main.__spec__ = None
        sys.modules["__main__"] = main
        return "code", args[1], main
    path = args[0]
    sys.argv = list(args)
    real = path
    for _ in range(40):
        if not os.path.islink(real):
            break
        real = os.path.join(os.path.dirname(real), os.readlink(real))
    sys.path[0] = os.path.dirname(real)
    from importlib.machinery import SourceFileLoader
    main.__file__ = path
    main.__cached__ = None
    main.__loader__ = SourceFileLoader("__main__", path)
    main.__spec__ = None
    sys.modules["__main__"] = main
    return "file", path, main


def _run(kind, what, main):
    if kind == "module":
        import runpy
        runpy._run_module_as_main(what, alter_argv=True)
        return
    if kind == "code":
        exec(compile(what, "<string>", "exec", dont_inherit=True), main.__dict__)
        return
    try:
        with open(what, "rb") as f:
            source = f.read()
    except OSError as e:
        sys.stderr.write("%s: can't open file %r: [Errno %d] %s\n" % (sys.orig_argv[0], what, e.errno, e.strerror))
        raise SystemExit(2)
    exec(compile(source, what, "exec", dont_inherit=True), main.__dict__)


def _cut(tb):
    while tb is not None and tb.tb_frame.f_code.co_filename == _SELF:
        tb = tb.tb_next
    return tb


def _exit_code(e):
    # As the interpreter's handling of SystemExit: None is 0, an int is
    # itself, anything else is printed and is 1.
    code = e.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code if -(1 << 31) <= code < (1 << 31) else -1
    try:
        sys.stderr.write(str(code) + "\n")
    except Exception:
        pass
    return 1


def _finish(code, sigint):
    # What the interpreter does at exit, in its order: join the threads,
    # run the atexit callbacks, then let the program's objects go (its
    # modules and __main__, so that files it left open are flushed and
    # __del__ runs), flush stdout and stderr. The modules of the warm-up
    # are not torn down: that took 100-300 ms with pandas loaded, and
    # nothing of the program's lives there.
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:
            pass
    import atexit
    atexit._run_exitfuncs()
    for name in reversed([n for n in list(sys.modules) if n not in _WARM_MODULES]):
        try:
            m = sys.modules.pop(name, None)
            if isinstance(m, _ModuleType) and m is not sys:
                _module_dict(m).clear()
        except BaseException:
            pass  # a module that misbehaves as it goes is left to os._exit
    m = None
    import gc
    gc.collect()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            if code == 0:
                code = 120
    if sigint:
        import signal
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


_SELF = __file__
_ModuleType = type(sys)
_module_dict = _ModuleType.__dict__["__dict__"].__get__  # not a module's own __dict__ property
_kind, _what, _main = _prepare(_warm_up())
_WARM_MODULES = set(sys.modules) - {"__main__"}
try:
    _run(_kind, _what, _main)
    _code, _sigint = 0, False
except SystemExit as e:
    _code, _sigint = _exit_code(e), False
except BaseException as e:
    sys.last_type, sys.last_value, sys.last_traceback = type(e), e, _cut(e.__traceback__)
    e.__traceback__ = sys.last_traceback
    try:
        sys.excepthook(type(e), e, sys.last_traceback)
    except BaseException:
        sys.__excepthook__(type(e), e, sys.last_traceback)
    _code, _sigint = 1, isinstance(e, KeyboardInterrupt)
    del e
_main = None
_finish(_code, _sigint)
