package main

// helpTail is what a command's -h ends with.
type helpTail struct {
	examples []string
	exits    string // for commands whose usage does not say them
}

// helpTails are the examples (and exit statuses) of every command's -h.
var helpTails = map[string]helpTail{
	"exec": {examples: []string{
		"codeagent exec analysis.py",
		"codeagent exec --workdir ./data --timeout 10s --memory 512MiB analysis.py",
		"codeagent exec prog.py -- sales.csv -v",
		"echo 'print(1)' | codeagent exec --lang python -",
	}},
	"run": {examples: []string{
		`codeagent run "plot the monthly revenue in sales.csv as revenue_trend.png"`,
		`codeagent run --apply --diff "add a total row to report.csv"`,
		`codeagent run --no-folder --file sales.csv --out results "top 5 products by revenue"`,
		`codeagent run --session sales "now by region, as a chart"`,
	}},
	"repl": {examples: []string{"codeagent repl", "codeagent repl --session analysis --timeout 60s"}},
	"doctor": {examples: []string{"codeagent doctor", "codeagent doctor --backend docker"},
		exits: "Exit status: 0 when the backend can isolate programs here, 1 when it cannot, 2 for usage errors\n(an unknown backend among them)."},
	"check": {examples: []string{"codeagent check analysis.py", "codeagent check --json --lang bash setup.sh"}},
	"sessions": {examples: []string{"codeagent sessions list", "codeagent sessions show sales", "codeagent sessions prune --older-than 7d"},
		exits: "Exit status: 0 on success, 1 on failure, 2 for usage errors or an unknown session."},
	"changes": {examples: []string{"codeagent changes list", "codeagent changes diff ID", "codeagent changes apply ID",
		"codeagent changes apply ID report.txt --force notes.txt", "codeagent changes prune --older-than 7d"}},
	"envs": {examples: []string{"codeagent envs list", "codeagent envs rm 3f2a9c", "codeagent envs prune --max 2GiB", "codeagent envs prune"},
		exits: "Exit status: 0 on success, 1 on failure (an environment in use), 2 for usage errors or an unknown key."},
	"log": {examples: []string{"codeagent log --session sales", "codeagent log --run 3f2a9c1b --since 2h --tail 20", "codeagent log --verify"},
		exits: "Exit status: 0 on success, 1 when --verify finds the log altered or a gap, 2 for usage errors or an\nunknown session or run."},
	"stats": {examples: []string{"codeagent stats", "codeagent stats --session sales --json"},
		exits: "Exit status: 0 on success, 1 on failure, 2 for usage errors or an unknown session."},
	"eval":  {examples: []string{"codeagent eval --tasks humaneval.jsonl --base-url http://localhost:11434/v1 --model qwen2.5-coder"}},
	"mcp":   {examples: []string{"codeagent mcp", "codeagent mcp --manifest codeagent.yaml"}},
	"serve": {examples: []string{"codeagent serve", "codeagent serve --addr 127.0.0.1:8080 --workers 4"}},
	"version": {examples: []string{"codeagent version"},
		exits: "Exit status: 0."},
}
