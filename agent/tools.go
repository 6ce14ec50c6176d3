package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
)

// Names of the tools of tool mode besides the execute tools.
const (
	ToolListFiles = "list_files"
	ToolReadFile  = "read_file"
	ToolWriteFile = "write_file"
	// ToolInstallPackages is offered when an Installer allows installing.
	ToolInstallPackages = "install_packages"
)

// execTools are the execute tools, by name, with their language.
var execTools = map[string]string{
	"execute_python":     "python",
	"execute_javascript": "javascript",
	"execute_bash":       "bash",
	"execute_go":         "go",
}

// ExecTool is the name of the execute tool that runs lang.
func ExecTool(lang string) string { return "execute_" + lang }

// Step is one tool call of tool mode and what became of it.
type Step struct {
	N    int    `json:"step"`
	Tool string `json:"tool"`
	// CallID is the model's name for the call.
	CallID string `json:"call_id"`
	// Arguments are the call's arguments as the model sent them (secrets
	// redacted).
	Arguments json.RawMessage `json:"arguments"`
	// Check is what the static checker found in an execute tool's code.
	Check []safety.Finding `json:"check,omitempty"`
	// Result is an execution's, as `codeagent exec --json` prints it; for
	// a kernel cell ExecutionCount numbers it in its kernel.
	Result         *sandbox.ResultJSON `json:"result,omitempty"`
	ExecutionCount int                 `json:"execution_count,omitempty"`
	// Output is the tool result as the model got it.
	Output string `json:"output"`
	// Refused says the call never ran: an unknown or unlisted tool,
	// arguments that do not validate, code the checker rejected, or the
	// budget spent.
	Refused    bool       `json:"refused,omitempty"`
	ErrorClass ErrorClass `json:"error_class,omitempty"`
	DurationMS int64      `json:"duration_ms"`
}

// ClassBadToolCall marks a call to a tool that is not offered or with
// arguments that do not validate; ClassReplay a program whose replay in a
// fresh sandbox did not reproduce what the verifier accepted.
const (
	ClassBadToolCall ErrorClass = "bad_tool_call"
	ClassReplay      ErrorClass = "replay"
)

// param is one argument of a tool: all are strings.
type param struct {
	name, doc string
	required  bool
}

// toolDef is a tool offered to the model.
type toolDef struct {
	name, doc string
	params    []param
	lang      lang.Language   // execute tools
	safeLang  safety.Language // execute tools
	limits    sandbox.Limits  // execute tools, with defaults
}

func (d toolDef) exec() bool { return d.lang.Name != "" }

// schema is the tool's JSON Schema: an object of string properties, no
// others.
func (d toolDef) schema() json.RawMessage {
	props := map[string]any{}
	req := []string{}
	for _, p := range d.params {
		props[p.name] = map[string]any{"type": "string", "description": p.doc}
		if p.required {
			req = append(req, p.name)
		}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": req, "additionalProperties": false})
	return b
}

// parse validates a call's arguments against the schema and returns them.
func (d toolDef) parse(raw json.RawMessage) (map[string]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("the arguments are not a JSON object: %s", cutRunes(string(raw), 120))
	}
	known := map[string]bool{}
	for _, p := range d.params {
		known[p.name] = true
	}
	var extra []string
	for k := range obj {
		if !known[k] {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return nil, fmt.Errorf("unknown argument(s) %s", cutRunes(strings.Join(extra, ", "), 120))
	}
	args := map[string]string{}
	for _, p := range d.params {
		v, ok := obj[p.name]
		if !ok || string(v) == "null" {
			if p.required {
				return nil, fmt.Errorf("the argument %q is missing", p.name)
			}
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, fmt.Errorf("the argument %q must be a string, not %s", p.name, cutRunes(string(v), 60))
		}
		args[p.name] = s
	}
	return args, nil
}

func (d toolDef) paramList() string {
	var names []string
	for _, p := range d.params {
		names = append(names, p.name)
	}
	if len(names) == 0 {
		return "no arguments"
	}
	return strings.Join(names, ", ")
}

// toolset builds the tools offered: the execute tools of cfg.Tools (when
// nil, Python's, JavaScript's and bash's, and execute_go to a Go run only,
// so that what every other run's request offers stays as it was) and the
// workspace tools.
func (a *Agent) toolset() []toolDef {
	var defs []toolDef
	names := make([]string, 0, len(execTools))
	for name := range execTools {
		if _, ok := a.cfg.Tools[name]; ok || (a.cfg.Tools == nil && (name != "execute_go" || a.lang.Name == "go")) {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool { return toolOrder(names[i]) < toolOrder(names[j]) })
	for _, name := range names {
		l, _ := lang.Lookup(execTools[name])
		sl, _ := safety.ParseLanguage(l.Name)
		lim := a.cfg.Limits.Overlay(a.cfg.Tools[name]).WithDefaults()
		doc := fmt.Sprintf("Run a %s program in the sandbox, in the working directory /workspace; returns its status, stdout and stderr. The code is statically checked first.", l.Name)
		if l.Name == "python" {
			doc = "Run Python code as a cell of a stateful kernel in the sandbox, in the working directory /workspace: variables, imports and loaded data stay for the next call. Returns stdout, stderr, the value of a last expression and any error. The code is statically checked first."
		}
		defs = append(defs, toolDef{name: name, doc: doc, lang: l, safeLang: sl, limits: lim,
			params: []param{{name: "code", doc: "the " + l.Name + " code to run", required: true}}})
	}
	if in := a.deps.Installer; in != nil && in.Allowed() != "" && a.lang.Name == "python" {
		defs = append(defs, toolDef{name: ToolInstallPackages,
			doc:    "Install Python packages for the code that follows (may be installed: " + in.Allowed() + "). The kernel then restarts: variables and loaded data are gone, so load them again.",
			params: []param{{name: "packages", doc: "requirements separated by commas, e.g. seaborn==0.13.2, scipy", required: true}}})
	}
	return append(defs,
		toolDef{name: ToolListFiles, doc: "List the files in the working directory (or one of its directories) with their sizes.",
			params: []param{{name: "path", doc: "a directory relative to the working directory; default: all of it"}}},
		toolDef{name: ToolReadFile, doc: fmt.Sprintf("Read a text file of the working directory (at most its first %d KiB).", readFileMax>>10),
			params: []param{{name: "path", doc: "the file's path relative to the working directory", required: true}}},
		toolDef{name: ToolWriteFile, doc: fmt.Sprintf("Write a text file (at most %d KiB) in the working directory, replacing it if it exists. The final program does not get it: what it needs, it must create itself.", writeFileMax>>10),
			params: []param{{name: "path", doc: "the file's path relative to the working directory", required: true},
				{name: "content", doc: "the whole text of the file", required: true}}},
	)
}

func toolOrder(name string) int {
	switch name {
	case "execute_python":
		return 0
	case "execute_javascript":
		return 1
	case "execute_bash":
		return 2
	}
	return 3
}

// llmTools is the toolset as the model gets it.
func llmTools(defs []toolDef) []llm.Tool {
	out := make([]llm.Tool, len(defs))
	for i, d := range defs {
		out[i] = llm.Tool{Name: d.name, Description: d.doc, Parameters: d.schema()}
	}
	return out
}

// validateTools checks the tool mode settings of a Config, setting the
// default step budget.
func (cfg *Config) validateTools(langName string) error {
	switch cfg.Mode {
	case "":
		cfg.Mode = ModeProgram
	case ModeProgram, ModeTools, ModeAuto:
	default:
		return fmt.Errorf("%w: mode %q: want program, tools or auto", ErrConfig, cfg.Mode)
	}
	if cfg.MaxSteps == 0 {
		cfg.MaxSteps = DefaultMaxSteps
	}
	if cfg.MaxSteps < 1 || cfg.MaxSteps > MaxStepsCeiling {
		return fmt.Errorf("%w: max steps %d is not between 1 and %d", ErrConfig, cfg.MaxSteps, MaxStepsCeiling)
	}
	for name := range cfg.Tools {
		if _, ok := execTools[name]; !ok {
			return fmt.Errorf("%w: unknown tool %q (want execute_python, execute_javascript or execute_bash)", ErrConfig, name)
		}
	}
	if cfg.Mode == ModeProgram {
		return nil
	}
	if _, ok := cfg.Tools[ExecTool(langName)]; cfg.Tools != nil && !ok {
		return fmt.Errorf("%w: tool mode for %s needs the tool %s, which is not offered", ErrConfig, langName, ExecTool(langName))
	}
	if cfg.Mode == ModeTools {
		switch {
		case cfg.Tests:
			return fmt.Errorf("%w: tool mode does not write tests first: use program mode for test-driven runs", ErrConfig)
		case cfg.Network != nil:
			return fmt.Errorf("%w: tool mode's kernel has no network: use program mode to reach hosts", ErrConfig)
		}
	}
	return nil
}
