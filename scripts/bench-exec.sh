#!/usr/bin/env bash
# Whole-process benchmark of `codeagent exec` against the bare interpreter,
# run as users call it: one process per execution, paired and interleaved
# (A, B, A, B, ...) so that machine noise hits both alike. Reports the
# median, the 10th and 90th percentiles and the difference of the medians.
#
# usage: bash scripts/bench-exec.sh [RUNS] [-- extra exec flags]
#   RUNS defaults to 21. Builds ./codeagent first. Cases: `pass` and
#   `import pandas, matplotlib.pyplot`; set BACKEND=docker for that backend.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-21}
shift || true
[ "${1:-}" = "--" ] && shift
bin=$(mktemp -d)/codeagent
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/codeagent
# The sandbox runs /usr/bin/python3; so does the bare case.
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
/usr/bin/env python3 - "$bin" "$py" "$runs" "${BACKEND:-namespace}" "$@" <<'PYEOF'
import statistics, subprocess, sys, tempfile, time, os
bin, py, runs, backend, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5:]
cases = {"pass": "pass\n", "pandas+matplotlib": "import pandas, matplotlib.pyplot\n"}
tmp = tempfile.mkdtemp()
def timed(argv):
    t = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t) * 1000
def pct(xs, p):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(p * len(xs)))]
print(f"{runs} paired runs, backend {backend}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
print(f"{'case':<20} {'bare median':>12} {'p10-p90':>14} {'exec median':>12} {'p10-p90':>14} {'diff':>8} {'ratio':>6}")
for name, code in cases.items():
    f = os.path.join(tmp, name.replace("+", "_") + ".py")
    open(f, "w").write(code)
    a = [py, f]
    b = [bin, "exec", "--backend", backend] + extra + [f]
    timed(a); timed(b)  # warm the page cache (and build codeagent's caches)
    bare, sb = [], []
    for _ in range(runs):
        bare.append(timed(a)); sb.append(timed(b))
    mb, ms = statistics.median(bare), statistics.median(sb)
    print(f"{name:<20} {mb:10.1f}ms {pct(bare,.1):6.1f}-{pct(bare,.9):<6.1f} {ms:10.1f}ms {pct(sb,.1):6.1f}-{pct(sb,.9):<6.1f} {ms-mb:6.1f}ms {ms/mb:6.2f}")
# The floor under `exec` of `pass` without a process that outlives the call:
# codeagent's own start (`version` does nothing else) and the cheapest bwrap
# with the namespaces the sandbox needs, each paired with the bare run.
if backend == "namespace":
    # -c: the program file lies under /tmp, which the bwrap case hides.
    floors = {"start of codeagent": [bin, "version"],
              "bwrap --unshare-all": ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
                                      "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", py, "-c", "pass"]}
    print("floor of `pass`        bare median   this median  (codeagent: alone; bwrap: diff from bare)")
    for name, argv in floors.items():
        try:
            timed(argv)
        except (OSError, subprocess.CalledProcessError):
            print(f"{name:<20} not measured: {argv[0]} did not run")
            continue
        bare, fl = [], []
        for _ in range(runs):
            bare.append(timed([py, "-c", "pass"])); fl.append(timed(argv))
        mb, mf = statistics.median(bare), statistics.median(fl)
        own = mf if name.startswith("start") else mf - mb
        print(f"{name:<20} {mb:10.1f}ms {mf:12.1f}ms {own:+8.1f}ms")
PYEOF
