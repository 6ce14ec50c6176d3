#!/usr/bin/env python3
"""Write a mixed set of HumanEval samples, for comparing codeagent's scorer
with the reference harness (openai/human-eval) on the same samples.

    python3 scripts/humaneval_mixed.py PROBLEMS.jsonl OUT.jsonl [--small]

Each line is a sample in the reference's input format, {task_id,
completion}, with three fields more that both harnesses ignore: kind (how
it was made), expect (the verdict the reference gives it by construction)
and forge (a wrong or early-exiting sample that tries to pass by faking
the verdict: passing it is a forged pass).

The samples are built from each task's canonical solution: as a body (the
reference's form) and as a whole module; broken, raising, looping and
sleeping ones; correct ones printing more than 1 MiB or playing with their
output; ones using what the reference disables (subprocess, os.system,
exit, resource); odd shapes (only the entry function, CRLF line ends,
typing imported another way, a __main__ block); and forging attempts. All
of them are harmless when run: the reference runs them on the host.

--small writes every kind for a dozen tasks (about 150 samples, one
loop), for the normal test suite.
"""
import json
import sys


def indent(code, by="    "):
    return "".join(by + line if line.strip() else line for line in code.splitlines(True))


def entry_only(p):
    """The entry function alone: the prompt from its def line, and the body."""
    prompt, entry = p["prompt"], p["entry_point"]
    i = prompt.find("def " + entry + "(")
    return prompt[i:] + p["canonical_solution"]


WRONG_BODY = "    return None\n"

# Lines a correct module may end with (or start with) and still pass.
NOISE = {
    "noise-stdout": ("print('x' * (1200 << 10))\n", "start"),
    "noise-stderr": ("import sys\nprint('y' * (1200 << 10), file=sys.stderr)\n", "start"),
    "noise-fd": ("import os as _os\n_os.write(1, b'z' * (1200 << 10))\n", "start"),
}
TRICKS = {
    "rebind-print": "import builtins\nbuiltins.print = lambda *a, **k: None\n",
    "stdout-devnull": "import os as _o, sys as _s\n_s.stdout = open(_o.devnull, 'w')\n",
    "atexit-print": "import atexit\natexit.register(print, 'codeagent-eval: check passed')\n",
    "prints-marker": "print('codeagent-eval: check passed')\nprint('passed')\n",
    "main-block": "if __name__ == '__main__':\n    input()\n",
    "unused-socket": "import socket\n",
}
# Forging attempts after a wrong body: each must fail.
FORGES = {
    "forge-systemexit": "print('codeagent-eval: check passed')\nraise SystemExit(0)\n",
    "forge-os-exit": "import os as _os\nprint('codeagent-eval: check passed', flush=True)\n_os._exit(0)\n",
    "forge-sys-exit": "import sys as _s\n_s.exit(0)\n",
    "forge-keyboard": "raise KeyboardInterrupt\n",
    "forge-stdin": "import sys as _s\nprint(_s.stdin.read())\n",
}
# Calls the reference disables, made inside a correct body: each fails.
DISABLED = {
    "disabled-subprocess": "    import subprocess\n    subprocess.run(['true'])\n",
    "disabled-system": "    import os\n    os.system('true')\n",
    "disabled-exit": "    exit()\n",
    "disabled-getcwd": "    import os\n    os.getcwd()\n",
    "disabled-rmtree": "    import shutil\n    shutil.rmtree('/nonexistent-codeagent-dir')\n",
    "disabled-resource": "    import resource\n",
}


def samples(problems, small):
    out = []

    def add(p, kind, completion, expect, forge=False):
        out.append({"task_id": p["task_id"], "completion": completion, "kind": kind, "expect": expect, "forge": forge})

    for i, p in enumerate(problems):
        body, prompt = p["canonical_solution"], p["prompt"]
        module = prompt + body
        if small and not (i % 23 == 0 or i in (10, 32, 38, 50, 64)):
            continue

        def pick(every):
            return small or i % every == 0

        def nth(every, kinds):
            return list(kinds)[(i // every) % len(kinds)] if not small else list(kinds)[i % len(kinds)]

        add(p, "canonical-body", body, True)
        add(p, "canonical-module", module, True)
        broken = [WRONG_BODY, "    return (\n", "    raise NotImplementedError('todo')\n"][i % 3]
        add(p, ["broken-wrong", "broken-syntax", "raising-body"][i % 3], broken, False)
        if pick(4):
            add(p, "raising-module", module + "raise RuntimeError('after the module')\n", False)
        if pick(2):
            kind = nth(2, NOISE)
            add(p, kind, NOISE[kind][0] + module, True)
        if pick(3):
            kind = nth(3, TRICKS)
            add(p, kind, module + TRICKS[kind], True)
        if pick(3):
            kind = nth(3, FORGES)
            add(p, kind, WRONG_BODY + FORGES[kind], False, forge=True)
            add(p, kind + "-correct", body + FORGES[kind], False, forge=True)
        if pick(4):
            kind = nth(4, DISABLED)
            add(p, kind, DISABLED[kind] + body, False)
        if pick(2):
            add(p, "entry-only", entry_only(p), True)
        if pick(6):
            add(p, "crlf-module", module.replace("\n", "\r\n"), True)
        if pick(6):
            add(p, "leading-blank-lines", "\n\n" + body, True)
        if (not small and i % 14 == 0) or (small and i == 0):
            add(p, "loop", "    while True:\n        pass\n", False)
        if not small and i % 40 == 1:
            add(p, "sleep", "    import time\n    time.sleep(10)\n", False)
        if not small and i % 80 == 3:
            # Correct as a module, a SyntaxError after the prompt: the one
            # shape where codeagent (which scores the module that ran)
            # and the reference (which always prepends the prompt) differ.
            add(p, "future-import-module", "from __future__ import annotations\n" + module, False)
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    small = "--small" in sys.argv
    if len(args) != 2:
        sys.exit(__doc__)
    with open(args[0], encoding="utf-8") as f:
        problems = [json.loads(line) for line in f if line.strip()]
    with open(args[1], "w", encoding="utf-8") as f:
        for s in samples(problems, small):
            f.write(json.dumps(s) + "\n")


if __name__ == "__main__":
    main()
