package mcpserver

import (
	"fmt"
	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/kernel"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/manifest"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// Limits are the limits a call may set; absent ones take the defaults (the
// manifest's tool limits, or the sandbox's).
type Limits struct {
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty" jsonschema:"wall-clock limit in seconds (default 30, or the manifest's)"`
	MemoryMB       int64   `json:"memory_mb,omitempty" jsonschema:"memory limit in MiB (default 256, or the manifest's)"`
	CPUs           float64 `json:"cpus,omitempty" jsonschema:"CPU limit in cores for all the program's processes (default 1)"`
	DiskMB         int64   `json:"disk_mb,omitempty" jsonschema:"limit in MiB for the workspace's growth and /tmp (default 100)"`
	Processes      int     `json:"processes,omitempty" jsonschema:"processes and threads (default 64)"`
}

// ExecuteInput is execute_code's input.
type ExecuteInput struct {
	Language string            `json:"language" jsonschema:"python, javascript, bash or go"`
	Code     string            `json:"code" jsonschema:"the complete program; it runs with the session's workspace as working directory"`
	Files    map[string]string `json:"files,omitempty" jsonschema:"text files to write into the workspace first: plain name to content"`
	Stdin    string            `json:"stdin,omitempty" jsonschema:"the program's standard input"`
	Limits   *Limits           `json:"limits,omitempty" jsonschema:"limits of this execution, within the server's caps"`
	// KeepState runs the code as a cell of the session's kernel.
	KeepState bool `json:"keep_state,omitempty" jsonschema:"python only: run the code as a cell of this session's kernel, whose variables, imports and loaded data stay for the next call with keep_state (pandas, numpy as np and matplotlib.pyplot as plt are loaded); the value of a final expression is returned, figures left open come back as images; only limits.timeout_seconds applies"`
	// AllowHosts are the hosts the program may reach (HOST[:PORT]), within
	// the server's egress ceiling; none: no network.
	AllowHosts []string `json:"allow_hosts,omitempty" jsonschema:"hosts the program may reach through codeagent's HTTP proxy (HOST[:PORT], *.example.com), within the server's egress ceiling; none means no network"`
	// Dependencies are Python or npm packages installed first (once,
	// cached).
	Dependencies *app.DependenciesRequest `json:"dependencies,omitempty" jsonschema:"not with keep_state: packages to install first, once, in a sandbox of their own: for python {python: [\"seaborn==0.13.2\"], index_url: a PEP 503 index}, for javascript {javascript: [\"lodash@4.17.21\"], npm_registry: an npm registry}, the index or registry within the server's egress ceiling; the program then runs offline with them"`
}

// ExecuteOutput is the `codeagent exec --json` object plus the files the
// program created or changed; with keep_state also what the cell displayed
// (images as image content) and the kernel's fate.
type ExecuteOutput struct {
	sandbox.ResultJSON
	ExecutionCount  int                  `json:"execution_count,omitempty" jsonschema:"with keep_state: the cell's number in its kernel"`
	Display         []kernel.Display     `json:"display,omitempty" jsonschema:"with keep_state: MIME bundles the cell showed (images are returned as image content instead)"`
	KernelDied      bool                 `json:"kernel_died,omitempty" jsonschema:"with keep_state: the kernel ended during this cell and its state is lost"`
	KernelRestarted bool                 `json:"kernel_restarted,omitempty" jsonschema:"with keep_state: the previous kernel had ended (restart_reason) and this cell ran in a fresh one"`
	RestartReason   string               `json:"restart_reason,omitempty"`
	Files           []workspace.Artifact `json:"files" jsonschema:"workspace files the program created or changed"`
	// Images lists the files also returned as image content.
	Images  []string            `json:"images,omitempty" jsonschema:"files also returned as image content"`
	Skipped []workspace.Skipped `json:"skipped,omitempty" jsonschema:"entries left out of files, with the reason"`
}

// CheckInput is check_code's input.
type CheckInput struct {
	Language string `json:"language" jsonschema:"python, javascript, bash or go"`
	Code     string `json:"code" jsonschema:"the code to check"`
}

// CheckOutput is check_code's result.
type CheckOutput struct {
	Language string           `json:"language"`
	Safe     bool             `json:"safe" jsonschema:"true when there are no findings"`
	Findings []safety.Finding `json:"findings" jsonschema:"rule, line, column, text, message and hint of each finding"`
	Lint     []safety.Finding `json:"lint,omitempty" jsonschema:"lint warnings (kind lint: undefined names, unused imports, ...), likely bugs that do not make the code unsafe"`
}

// RunTaskInput is run_task's input.
type RunTaskInput struct {
	Task          string            `json:"task" jsonschema:"the task in plain language"`
	Language      string            `json:"language,omitempty" jsonschema:"language of the program (default python)"`
	Files         map[string]string `json:"files,omitempty" jsonschema:"text input files to write into the workspace first: plain name to content"`
	MaxIterations int               `json:"max_iterations,omitempty" jsonschema:"attempts at the program"`
	Tests         string            `json:"tests,omitempty" jsonschema:"tests that load the solution: pytest importing from solution (python), node --test requiring ./solution.js (javascript), or go test in package main beside solution.go (go); success means they pass"`
	Verify        *bool             `json:"verify,omitempty" jsonschema:"ask the model whether a successful run completed the task (default true)"`
	AllowHosts    []string          `json:"allow_hosts,omitempty" jsonschema:"hosts the programs may reach through codeagent's HTTP proxy (HOST[:PORT]), within the server's egress ceiling; none means no network"`
	Mode          string            `json:"mode,omitempty" jsonschema:"program (default: the model writes whole programs), tools (it calls execute_python in the session's kernel and the workspace's files; the successful cells are replayed as the program) or auto (tools when the model's endpoint takes them)"`
	MaxSteps      int               `json:"max_steps,omitempty" jsonschema:"tool calls in tool mode"`
	// Dependencies are Python or npm packages installed before the first
	// program.
	Dependencies *app.DependenciesRequest `json:"dependencies,omitempty" jsonschema:"program mode only: packages to install first, once, in a sandbox of their own ({python: [\"seaborn==0.13.2\"], index_url: a PEP 503 index} for python, {javascript: [\"lodash@4.17.21\"], npm_registry: an npm registry} for javascript, within the server's egress ceiling); every program of the run gets them"`
	// Approve asks the client, by MCP elicitation, before executions.
	Approve string `json:"approve,omitempty" jsonschema:"always (or true): ask the MCP client's user, by elicitation, before each program runs (approve, reject with a reason for the model, edit the code, or stop the run); on-finding: only when the static checker raised something or a program asks for hosts beyond allow_hosts; needs a client that supports elicitation in form mode"`
}

// RunTaskOutput is run_task's result.
type RunTaskOutput struct {
	Success   bool                 `json:"success"`
	Attempts  int                  `json:"attempts"`
	Code      string               `json:"code" jsonschema:"the final program (saved in the workspace as .codeagent/solution.py or the like)"`
	Output    string               `json:"output" jsonschema:"the program's stdout in the last run"`
	Artifacts []workspace.Artifact `json:"artifacts" jsonschema:"workspace files the program created or changed"`
	Images    []string             `json:"images,omitempty" jsonschema:"artifacts also returned as image content"`
	Message   string               `json:"message,omitempty" jsonschema:"why the run failed, when it did"`
	Stopped   bool                 `json:"stopped,omitempty" jsonschema:"the client's user stopped the run at an approval"`
	Requests  int                  `json:"model_requests"`
	Tokens    int64                `json:"total_tokens"`
}

// ListFilesInput is list_files' input (none).
type ListFilesInput struct{}

// FileInfo is one workspace file.
type FileInfo struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Modified string `json:"modified" jsonschema:"RFC 3339 time of the last change"`
}

// ListFilesOutput is list_files' result.
type ListFilesOutput struct {
	Files     []FileInfo `json:"files"`
	Truncated bool       `json:"truncated" jsonschema:"true when the workspace has more entries than were listed"`
}

// ReadFileInput is read_file's input.
type ReadFileInput struct {
	Path string `json:"path" jsonschema:"relative path in the workspace, e.g. plot.png or out/data.csv"`
}

// ReadFileOutput is read_file's result: text in content, or other bytes in
// content_base64; images are also returned as image content.
type ReadFileOutput struct {
	Path          string `json:"path"`
	Size          int64  `json:"size"`
	Content       string `json:"content,omitempty" jsonschema:"the file as text, when it is UTF-8"`
	ContentBase64 string `json:"content_base64,omitempty" jsonschema:"the file in base64, when it is not UTF-8"`
}

// WriteFileInput is write_file's input.
type WriteFileInput struct {
	Name          string `json:"name" jsonschema:"plain file name: letters, digits, '.', '_', '-', '+' or spaces; no directories"`
	Content       string `json:"content,omitempty" jsonschema:"text content"`
	ContentBase64 string `json:"content_base64,omitempty" jsonschema:"binary content in base64 (instead of content)"`
}

// WriteFileOutput is write_file's result.
type WriteFileOutput struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// allowedLanguages are the languages whose tool the manifest lists, or all.
func allowedLanguages(m *manifest.Manifest) []string {
	var out []string
	for _, l := range lang.All() {
		if m == nil {
			out = append(out, l.Name)
			continue
		}
		if _, err := m.ToolFor(l.Name); err == nil {
			out = append(out, l.Name)
		}
	}
	return out
}

// addTools registers the tools the manifest allows.
func (s *Server) addTools() error {
	langs := strings.Join(s.langs, ", ")
	if len(s.langs) > 0 {
		schema, err := inputSchema[ExecuteInput](func(sc *jsonschema.Schema) {
			sc.Properties["language"].Description = "language of the program; offered here: " + langs
			sc.Properties["code"].MinLength = ptr(1)
			lim := sc.Properties["limits"]
			for _, p := range []string{"timeout_seconds", "memory_mb", "disk_mb", "processes"} {
				lim.Properties[p].Minimum = ptr(0.0)
			}
		})
		if err != nil {
			return err
		}
		mcp.AddTool(s.mcp, &mcp.Tool{Name: "execute_code", InputSchema: schema,
			Description: "Run a program in codeagent's sandbox (no network; the session's workspace is the working directory; " +
				"files persist between calls of the session). Returns the `codeagent exec --json` object with the files the " +
				"program created or changed; images it wrote are returned as image content. With keep_state (Python) the code is a " +
				"cell of the session's kernel: its variables stay for the next cell. Languages: " + langs + "."},
			mapErrors(s.executeCode))
	}
	checkSchema, err := inputSchema[CheckInput](func(sc *jsonschema.Schema) {
		// Any name package lang knows, aliases included, as execute_code.
		sc.Properties["language"].Description = "language of the code: " + lang.Describe()
	})
	if err != nil {
		return err
	}
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "check_code", InputSchema: checkSchema,
		Description: "Statically check code for unsafe constructs (forbidden imports and builtins, introspection, paths " +
			"outside the workspace, ...). Returns the findings with a hint for each; an empty list means none."},
		mapErrors(s.checkCode))
	switch {
	case len(s.langs) == 0:
		s.log.Warn("run_task is not offered: the manifest lists no execution tool")
	case s.deps.Model == nil:
		s.log.Warn("run_task is not offered: no model is configured", "reason", s.deps.ModelError)
	default:
		schema, err := inputSchema[RunTaskInput](func(sc *jsonschema.Schema) {
			sc.Properties["task"].MinLength = ptr(1)
			sc.Properties["language"].Description = "language of the program; offered here: " + langs + " (default " + s.langs[0] + ")"
			// The ceilings are said here and checked by app.RunRequest.Validate,
			// which refuses with the message every door gives.
			sc.Properties["max_iterations"].Description = fmt.Sprintf("attempts at the program (1-%d, default %d)", agent.MaxIterationsCeiling, s.cfg.MaxIterations)
			sc.Properties["max_steps"].Description = fmt.Sprintf("tool calls in tool mode (1-%d, default %d)", agent.MaxStepsCeiling, agent.DefaultMaxSteps)
		})
		if err != nil {
			return err
		}
		mcp.AddTool(s.mcp, &mcp.Tool{Name: "run_task", InputSchema: schema,
			Description: "Turn a task in plain language into working code: codeagent's agent generates a program, checks it, " +
				"runs it in the sandbox in the session's workspace, verifies the output and debugs until done. Sends a progress " +
				"notification per step when the request has a progress token. Returns the final code, output and artifacts."},
			mapErrors(s.runTask))
	}
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "list_files", Description: "List the files in the session's workspace."}, mapErrors(s.listFiles))
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "read_file",
		Description: "Read a file of the session's workspace: text as text, other bytes in base64, images also as image content."},
		mapErrors(s.readFile))
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "write_file",
		Description: "Write a file into the session's workspace, replacing what is there under that name."}, mapErrors(s.writeFile))
	return nil
}

// inputSchema infers T's schema and lets edit refine it.
func inputSchema[T any](edit func(*jsonschema.Schema)) (*jsonschema.Schema, error) {
	sc, err := jsonschema.For[T](nil)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: schema of %T: %w", *new(T), err)
	}
	edit(sc)
	return sc, nil
}

func ptr[T any](v T) *T { return &v }
