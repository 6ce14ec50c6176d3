#!/usr/bin/env python3
"""Compare codeagent's verdicts with the reference harness's, per sample.

    python3 scripts/humaneval_compare.py SAMPLES.jsonl OURS.jsonl [REFERENCE_RESULTS.jsonl]

SAMPLES.jsonl is what scripts/humaneval_mixed.py wrote; OURS.jsonl the
results file of `codeagent eval --samples-file SAMPLES.jsonl --results
OURS.jsonl`; REFERENCE_RESULTS.jsonl the SAMPLES.jsonl_results.jsonl that
the reference's evaluate_functional_correctness wrote (same order as the
samples). Without it, the samples' expected verdicts stand in for the
reference. Prints agreement overall and by kind, forged passes, and each
disagreement; exits 1 when agreement is under 99.5% or a forge passed.
"""
import collections
import json
import sys


def read(name):
    with open(name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    samples, ours = read(sys.argv[1]), read(sys.argv[2])
    ref = read(sys.argv[3]) if len(sys.argv) == 4 else None
    verdict = {}
    for r in ours:
        verdict[(r["task_id"], r.get("sample", 0))] = r
    index = collections.Counter()
    agree, forged, rows = 0, 0, []
    by_kind = collections.defaultdict(lambda: [0, 0])
    for i, s in enumerate(samples):
        key = (s["task_id"], index[s["task_id"]])
        index[s["task_id"]] += 1
        mine = verdict.get(key)
        if mine is None:
            sys.exit("no codeagent verdict for %s sample %d" % key)
        theirs = ref[i]["passed"] if ref else s["expect"]
        same = mine["passed"] == theirs
        agree += same
        by_kind[s["kind"]][0] += same
        by_kind[s["kind"]][1] += 1
        if s.get("forge") and mine["passed"]:
            forged += 1
        if not same:
            rows.append("%s #%d %s: codeagent %s (%s, %s), %s %s%s" % (
                key[0], key[1], s["kind"], mine["passed"], mine.get("scored_form", ""), mine.get("score_class", ""),
                "reference" if ref else "expected", theirs, (" (" + ref[i]["result"] + ")") if ref else ""))
    n = len(samples)
    print("samples %d, agreement %d (%.2f%%) with the %s, forged passes %d" % (
        n, agree, 100.0 * agree / n, "reference" if ref else "expected verdicts", forged))
    for kind in sorted(by_kind):
        a, t = by_kind[kind]
        if a != t:
            print("  %-28s %d/%d" % (kind, a, t))
    for r in rows:
        print("  " + r)
    sys.exit(0 if agree >= 0.995 * n and forged == 0 else 1)


if __name__ == "__main__":
    main()
