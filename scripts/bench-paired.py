#!/usr/bin/env python3
"""Paired A/B of the namespace backend's warm overhead between two builds.

Usage: bench-paired.py N A.test B.test

A.test and B.test are `go test -c` binaries of ./sandbox/namespace (for
example at two commits; copy bench_paired_test.go into a checkout that
lacks it). Each runs BenchmarkPairedServe; this script asks them for one
iteration at a time, alternating (ABBA...), N iterations each, and prints
each build's median bare time, sandbox time and overhead, and the median
of the paired differences of the sandbox times (B - A). Run it as root,
as the benchmarks are.
"""
import os
import statistics
import subprocess
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    n, bins = int(sys.argv[1]), sys.argv[2:]
    env = dict(os.environ, CODEAGENT_BENCH_PAIRED="1")
    procs = [subprocess.Popen([b, "-test.run", "^$", "-test.bench", "^BenchmarkPairedServe$", "-test.benchtime", "1x"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env) for b in bins]
    res = [[] for _ in bins]

    def one(i):
        p = procs[i]
        p.stdin.write("x\n")
        p.stdin.flush()
        while True:
            line = p.stdout.readline()
            if not line:
                sys.exit(f"{bins[i]} ended early")
            if line.startswith("PAIRED "):
                bare, box = map(int, line.split()[1:3])
                res[i].append((bare, box))
                return

    for k in range(n):
        for i in (0, 1) if k % 2 == 0 else (1, 0):
            one(i)
    for p in procs:
        p.stdin.close()
        p.wait()
    for b, r in zip(bins, res):
        bare = statistics.median(a for a, _ in r) / 1000
        box = statistics.median(s for _, s in r) / 1000
        over = statistics.median(s - a for a, s in r) / 1000
        print(f"{b}: bare {bare:.2f} ms, sandbox {box:.2f} ms, overhead {over:.2f} ms (median of {len(r)})")
    d = [res[1][k][1] - res[0][k][1] for k in range(n)]
    print(f"sandbox time, B - A, paired: median {statistics.median(d) / 1000:+.2f} ms, mean {statistics.mean(d) / 1000:+.2f} ms")


if __name__ == "__main__":
    main()
