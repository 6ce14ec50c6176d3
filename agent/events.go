package agent

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
)

// EventType names a step of the loop. The values are a stable wire format:
// they are written by `codeagent run --events` and streamed by the server.
type EventType string

// Event types, in the order a step emits them.
const (
	EventAttemptStart     EventType = "attempt_start"     // an attempt begins (model call next)
	EventGenerated        EventType = "generated"         // the model answered with code (or none)
	EventChecked          EventType = "checked"           // the static check ran
	EventExecuted         EventType = "executed"          // the program (or the tests) ran in the sandbox
	EventVerified         EventType = "verified"          // the verifier judged a successful run
	EventAccepted         EventType = "accepted"          // the caller's acceptance check (Task.Accept) ran
	EventToolCall         EventType = "tool_call"         // tool mode: the model called a tool (checked, executed may follow)
	EventToolResult       EventType = "tool_result"       // tool mode: what the call gave the model
	EventReplayed         EventType = "replayed"          // tool mode: the assembled program ran in a fresh sandbox
	EventReviewed         EventType = "reviewed"          // the reviewer model judged code before it ran
	EventApprovalRequired EventType = "approval_required" // a person is asked whether code may run
	EventApproval         EventType = "approval"          // the person's decision (or its expiry)
	EventDone             EventType = "done"              // the run ended
)

// Phases of the loop, in Event.Phase.
const (
	PhaseTests   = "tests"   // generating and validating tests (test-driven mode)
	PhaseCode    = "code"    // generating and running the program
	PhaseProgram = "program" // running the program after its tests passed
	PhaseTool    = "tool"    // tool mode: model answers, tool calls, the replay
)

// Event is one step of a run. Fields not relevant to a type are omitted.
type Event struct {
	Type        EventType `json:"type"`
	Time        time.Time `json:"time"`
	Attempt     int       `json:"attempt"`
	MaxAttempts int       `json:"max_attempts"`
	Phase       string    `json:"phase,omitempty"`
	// FreshStart marks an attempt regenerated from the task (attempt_start).
	FreshStart bool `json:"fresh_start,omitempty"`
	// Code is the extracted program or tests (generated), or the program
	// assembled from tool calls (replayed), as it runs: only the secrets
	// codeagent knows are masked in it (Redactor.Code). CodeSHA256 is the
	// sha256 of the code as it runs, unmasked.
	Code       string `json:"code,omitempty"`
	CodeSHA256 string `json:"code_sha256,omitempty"`
	// Findings of the static check (checked), then its lint warnings
	// (Kind "lint"); Safe says there were no findings, warnings aside.
	Findings []safety.Finding `json:"findings,omitempty"`
	Safe     *bool            `json:"safe,omitempty"`
	// Result of the execution, as `codeagent exec --json` prints it (executed).
	Result *sandbox.ResultJSON `json:"result,omitempty"`
	// Cut is what codeagent took out of the execution's output before
	// Result (executed): an execution trace, a coverage report.
	Cut []Cut `json:"cut,omitempty"`
	// ErrorClass of a failed step (checked, executed, verified, generated).
	ErrorClass ErrorClass `json:"error_class,omitempty"`
	// Tests is what a run of tests showed (executed, test-driven mode):
	// "failed", "passed", "none" (no tests found) or "broken" (they could
	// not run); in the tests phase, "failed" (on the stub) accepts them.
	Tests string `json:"tests,omitempty"`
	// Verdict of the verifier (verified).
	Verdict *Verdict `json:"verdict,omitempty"`
	// Acceptance is the caller's check of the code (accepted).
	Acceptance *Acceptance `json:"acceptance,omitempty"`
	// Mode is the run's mode, program or tools (the first attempt_start
	// once it is decided, and done).
	Mode string `json:"mode,omitempty"`
	// Step numbers a tool call in the run, of MaxSteps; Tool, CallID and
	// Arguments are the call (tool_call and the checked and executed
	// events of its code); ToolResult is what the model got back
	// (tool_result).
	Step       int             `json:"step,omitempty"`
	MaxSteps   int             `json:"max_steps,omitempty"`
	Tool       string          `json:"tool,omitempty"`
	CallID     string          `json:"call_id,omitempty"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	ToolResult string          `json:"tool_result,omitempty"`
	// Review is the reviewer's verdict (reviewed); Approval what a person
	// is asked (approval_required); Decision what they decided (approval).
	Review   *Review          `json:"review,omitempty"`
	Approval *ApprovalRequest `json:"approval,omitempty"`
	Decision *ApprovalRecord  `json:"decision,omitempty"`
	// Success and Message close the run (done); Message also says why an
	// answer could not be used (generated, error class bad_answer) and
	// how a replay differed (replayed).
	Success *bool  `json:"success,omitempty"`
	Message string `json:"message,omitempty"`
	// DurationMS is the step's wall time: the model call (generated), the
	// check (checked), the execution (executed, replayed), the verifier
	// (verified), the acceptance check (accepted), the tool call
	// (tool_result) or the whole run (done).
	DurationMS int64 `json:"duration_ms,omitempty"`
}

// Observer receives the events of a run, in order, from the goroutine that
// runs it. It must not block for long: the loop waits for it.
type Observer interface {
	Event(e Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// Event implements Observer.
func (f ObserverFunc) Event(e Event) { f(e) }

// Observers fans events out to several observers, skipping nil ones.
func Observers(obs ...Observer) Observer {
	return ObserverFunc(func(e Event) {
		for _, o := range obs {
			if o != nil {
				o.Event(e)
			}
		}
	})
}

// JSONLines is an Observer that writes each event as one line of JSON to
// w. Write errors are remembered (Err) and later events dropped, so a
// closed pipe never stops a run.
type JSONLines struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

// NewJSONLines returns a JSONLines observer writing to w.
func NewJSONLines(w io.Writer) *JSONLines { return &JSONLines{w: w} }

// Event implements Observer.
func (j *JSONLines) Event(e Event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return
	}
	b, err := json.Marshal(e)
	if err == nil {
		_, err = j.w.Write(append(b, '\n'))
	}
	j.err = err
}

// Err returns the first write error, if any.
func (j *JSONLines) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}
