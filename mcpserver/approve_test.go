package mcpserver_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/mcpserver"
	"github.com/codeagent/codeagent/sandbox/backends"
)

// legacyProtocol is the newest MCP version in which a server may ask the
// client (elicitation/create) while it serves a call.
const legacyProtocol = "2025-11-25"

// approveServer is an MCP server with the real sandbox and a model
// scripted with replies.
func approveServer(t *testing.T, replies ...llmtest.Reply) (*mcpserver.Server, *llmtest.Server) {
	t.Helper()
	sb, err := backends.Open("auto", backends.Options{})
	if err != nil {
		t.Fatalf("the sandbox cannot run here: %v", err)
	}
	t.Cleanup(func() { sb.Close() })
	model := llmtest.NewOpenAIServer(t, replies...)
	cfg := llmtest.Config(llm.ProviderOpenAI, model.BaseURL)
	srv, err := mcpserver.New(mcpserver.Config{WorkDir: t.TempDir()}, mcpserver.Deps{Sandbox: sb, Model: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, model
}

// connectWith connects a client with opts to srv in protocol version pv
// ("" the SDK's newest).
func connectWith(t *testing.T, srv *mcpserver.Server, opts *mcp.ClientOptions, pv string) (context.Context, *mcp.ClientSession) {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	go func() { _ = srv.Run(context.Background(), st) }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	sess, err := mcp.NewClient(&mcp.Implementation{Name: "approver", Version: "v0"}, opts).
		Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: pv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return ctx, sess
}

// elicitations answers elicitations from a script and keeps their
// messages.
type elicitations struct {
	mu       sync.Mutex
	answers  []*mcp.ElicitResult
	messages []string
}

func (e *elicitations) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.messages = append(e.messages, req.Params.Message)
	if len(e.answers) == 0 {
		return &mcp.ElicitResult{Action: "cancel"}, nil
	}
	a := e.answers[0]
	e.answers = e.answers[1:]
	return a, nil
}

func (e *elicitations) seen() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.messages...)
}

func runTask(t *testing.T, ctx context.Context, sess *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, mcpserver.RunTaskOutput) {
	t.Helper()
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "run_task", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	var out mcpserver.RunTaskOutput
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	return res, out
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func py(code string) llmtest.Reply { return llmtest.Say("```python\n" + code + "\n```") }

// A rejection's reason reaches the model, which writes the program again;
// the client approves that one and it runs.
func TestMCPRunTaskApproveRejectThenApprove(t *testing.T) {
	srv, model := approveServer(t, py("print('hello')"), py("print('HELLO')"))
	el := &elicitations{answers: []*mcp.ElicitResult{
		{Action: "accept", Content: map[string]any{"decision": "reject", "reason": "use capitals"}},
		{Action: "accept", Content: map[string]any{"decision": "approve"}},
	}}
	ctx, sess := connectWith(t, srv, &mcp.ClientOptions{ElicitationHandler: el.handle}, legacyProtocol)
	res, out := runTask(t, ctx, sess, map[string]any{"task": "greet", "verify": false, "approve": "always"})
	if res.IsError || !out.Success || strings.TrimSpace(out.Output) != "HELLO" {
		t.Fatalf("run_task: %s %+v", resultText(res), out)
	}
	msgs := el.seen()
	if len(msgs) != 2 || !strings.Contains(msgs[0], "print('hello')") || !strings.Contains(msgs[1], "print('HELLO')") {
		t.Fatalf("the client was asked %d times: %q", len(msgs), msgs)
	}
	reqs := model.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].Text(), "use capitals") {
		t.Fatalf("the model's second request lacks the reason (%d requests)", len(reqs))
	}
}

// Edited code the client gives with its approval runs instead of the
// model's.
func TestMCPRunTaskApproveEditedCode(t *testing.T) {
	srv, _ := approveServer(t, py("print('from the model')"))
	el := &elicitations{answers: []*mcp.ElicitResult{
		{Action: "accept", Content: map[string]any{"decision": "approve", "code": "print('edited by a person')\n"}},
	}}
	ctx, sess := connectWith(t, srv, &mcp.ClientOptions{ElicitationHandler: el.handle}, legacyProtocol)
	res, out := runTask(t, ctx, sess, map[string]any{"task": "print something", "verify": false, "approve": "true"})
	if res.IsError || !strings.Contains(out.Output, "edited by a person") || strings.Contains(out.Output, "from the model") {
		t.Fatalf("run_task: %s %+v", resultText(res), out)
	}
}

// The client's cancel stops the run before the program runs: the file it
// would write is not there.
func TestMCPRunTaskApproveCancelStops(t *testing.T) {
	srv, model := approveServer(t, py("open('marker.txt', 'w').write('ran')\nprint('wrote')"))
	el := &elicitations{answers: []*mcp.ElicitResult{{Action: "cancel"}}}
	ctx, sess := connectWith(t, srv, &mcp.ClientOptions{ElicitationHandler: el.handle}, legacyProtocol)
	res, out := runTask(t, ctx, sess, map[string]any{"task": "write a marker", "verify": false, "approve": "always"})
	if res.IsError || out.Success || !out.Stopped || !strings.Contains(out.Message, "stopped by mcp-client:approver") {
		t.Fatalf("run_task: %s %+v", resultText(res), out)
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("the model was asked %d times after the stop, want 1", n)
	}
	list, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "list_files"})
	if err != nil || list.IsError {
		t.Fatalf("list_files: %v %+v", err, list)
	}
	if strings.Contains(resultText(list), "marker.txt") {
		t.Fatalf("the stopped program ran: %s", resultText(list))
	}
}

// A client that cannot be asked gets a tool error naming elicitation, and
// nothing runs: the model is never asked.
func TestMCPRunTaskApproveNeedsElicitation(t *testing.T) {
	for _, c := range []struct {
		name string
		opts *mcp.ClientOptions
		pv   string
		want string
	}{
		{"no elicitation", nil, legacyProtocol, "elicitation (form); this client does not declare it"},
		{"no elicitation, newest protocol", nil, "", "elicitation (form); this client does not declare it"},
		{"newest protocol", &mcp.ClientOptions{ElicitationHandler: (&elicitations{}).handle}, "", "multi round-trip"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, model := approveServer(t, py("print(1)"))
			ctx, sess := connectWith(t, srv, c.opts, c.pv)
			res, _ := runTask(t, ctx, sess, map[string]any{"task": "print 1", "approve": "on-finding"})
			if !res.IsError || !strings.Contains(resultText(res), c.want) {
				t.Fatalf("run_task: %v %s", res.IsError, resultText(res))
			}
			if n := len(model.Requests()); n != 0 {
				t.Fatalf("the model was asked %d times", n)
			}
		})
	}
}

// approve takes always, true, on-finding or nothing; anything else is a
// tool error naming them.
func TestMCPRunTaskApproveInvalid(t *testing.T) {
	srv, model := approveServer(t)
	el := &elicitations{}
	ctx, sess := connectWith(t, srv, &mcp.ClientOptions{ElicitationHandler: el.handle}, legacyProtocol)
	res, _ := runTask(t, ctx, sess, map[string]any{"task": "print 1", "approve": "sometimes"})
	if !res.IsError || !strings.Contains(resultText(res), "on-finding") || !strings.Contains(resultText(res), "sometimes") {
		t.Fatalf("run_task: %v %s", res.IsError, resultText(res))
	}
	if n := len(model.Requests()); n != 0 || len(el.seen()) != 0 {
		t.Fatalf("the model was asked %d times, the client %d", n, len(el.seen()))
	}
}

// A host beyond the server's egress ceiling (none here) is refused
// without asking the client: no approval grants it.
func TestMCPRunTaskApproveHostBeyondCeiling(t *testing.T) {
	srv, model := approveServer(t, py("# network: example.com\nprint(1)"), py("print(2)"))
	el := &elicitations{answers: []*mcp.ElicitResult{{Action: "accept", Content: map[string]any{"decision": "approve"}}}}
	ctx, sess := connectWith(t, srv, &mcp.ClientOptions{ElicitationHandler: el.handle}, legacyProtocol)
	res, out := runTask(t, ctx, sess, map[string]any{"task": "print", "verify": false, "approve": "always"})
	if res.IsError || !out.Success || strings.TrimSpace(out.Output) != "2" {
		t.Fatalf("run_task: %s %+v", resultText(res), out)
	}
	if msgs := el.seen(); len(msgs) != 1 || !strings.Contains(msgs[0], "print(2)") {
		t.Fatalf("the client was asked %d times: %q", len(msgs), msgs)
	}
	if reqs := model.Requests(); len(reqs) != 2 || !strings.Contains(reqs[1].Text(), "no one can allow here") {
		t.Fatalf("the model was not told the host cannot be granted (%d requests)", len(reqs))
	}
}
