package eval

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/llmtest"
	"github.com/codeagent/codeagent/llm/providers"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
)

// humanEvalPath is the shared HumanEval file beside the main checkout
// (../shared from the repository root), or beside a worktree of it.
var humanEvalPath = func() string {
	for _, p := range []string{"../../shared/data/humaneval.jsonl", "../../../shared/data/humaneval.jsonl"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "../../shared/data/humaneval.jsonl"
}()

// The real parts shared by the tests: one warm sandbox and one checker,
// as the CLI uses them.
var (
	realOnce    sync.Once
	realSandbox sandbox.Sandbox
	realChecker *safety.Checker
	realErr     error
)

func realParts(t testing.TB) (sandbox.Sandbox, *safety.Checker) {
	t.Helper()
	realOnce.Do(func() {
		realSandbox, realErr = backends.Open("auto", backends.Options{Warm: 2})
		if realErr == nil {
			realChecker, realErr = safety.New(nil)
		}
	})
	if realErr != nil {
		t.Skipf("no sandbox here: %v", realErr)
	}
	return realSandbox, realChecker
}

// humanEval loads the first n HumanEval tasks (all when n <= 0) and the
// canonical answer of each, by task id.
func humanEval(t testing.TB, n int) ([]Task, map[string]string) {
	t.Helper()
	s, err := LoadFile(humanEvalPath)
	if err != nil {
		t.Skipf("HumanEval not available: %v", err)
	}
	f, err := os.Open(humanEvalPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	answers := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var h struct{ TaskID, Prompt, CanonicalSolution string }
		var raw map[string]string
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			t.Fatal(err)
		}
		h.TaskID, h.Prompt, h.CanonicalSolution = raw["task_id"], raw["prompt"], raw["canonical_solution"]
		answers[h.TaskID] = h.Prompt + h.CanonicalSolution
	}
	tasks := s.Tasks
	if n > 0 && n < len(tasks) {
		tasks = tasks[:n]
	}
	return tasks, answers
}

// fakeModel is an OpenAI-compatible server that answers each request with
// answer(task, request): the task is found by its prompt in the first user
// message. It counts requests per task.
type fakeModel struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]int
	texts map[string][]string // every request's messages, joined, by task
}

// chatRequest is a request as the fake sees it.
type chatRequest struct {
	Messages []string // contents, in order; [0] is the system prompt
	Users    int      // user messages
}

func newFakeModel(t testing.TB, tasks []Task, answer func(t *Task, req chatRequest) string) *fakeModel {
	t.Helper()
	m := &fakeModel{calls: map[string]int{}, texts: map[string][]string{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req chatRequest
		first := ""
		for _, msg := range body.Messages {
			text, _ := msg.Content.(string)
			if parts, ok := msg.Content.([]any); ok {
				for _, p := range parts {
					if pm, ok := p.(map[string]any); ok {
						s, _ := pm["text"].(string)
						text += s
					}
				}
			}
			req.Messages = append(req.Messages, text)
			if msg.Role == "user" {
				if req.Users == 0 {
					first = text
				}
				req.Users++
			}
		}
		var task *Task
		for i := range tasks {
			if strings.Contains(first, tasks[i].Prompt) && (task == nil || len(tasks[i].Prompt) > len(task.Prompt)) {
				task = &tasks[i]
			}
		}
		if task == nil {
			http.Error(w, `{"error":{"message":"fake model: unknown task"}}`, http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.calls[task.ID]++
		m.texts[task.ID] = append(m.texts[task.ID], strings.Join(req.Messages, "\n"))
		m.mu.Unlock()
		text := answer(task, req)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000, "model": "fake-model",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": text}}},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
		})
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *fakeModel) provider(t testing.TB) llm.Provider {
	t.Helper()
	p, err := providers.New(llmtest.Config(llm.ProviderOpenAI, m.URL+"/v1"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (m *fakeModel) callsOf(id string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[id]
}

func (m *fakeModel) requestsOf(id string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.texts[id]...)
}

func pyBlock(code string) string { return "Here it is.\n\n```python\n" + code + "\n```\n" }
