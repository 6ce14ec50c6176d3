package app

import (
	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/kernel"
)

// The vocabulary the doors decode and encode, defined by the libraries
// below app and named here so that a door needs app alone: an agent run's
// configuration, events and result, and a kernel's cells and state. They
// are the libraries' own types (aliases), not copies.
type (
	AgentConfig  = agent.Config
	Task         = agent.Task
	Event        = agent.Event
	EventType    = agent.EventType
	RunResult    = agent.Result
	Attempt      = agent.Attempt
	Observer     = agent.Observer
	Cell         = kernel.Cell
	CellResult   = kernel.Result
	Display      = kernel.Display
	KernelKey    = kernel.Key
	KernelStatus = kernel.Status
	// A person's approval of an execution (agent/approve.go).
	ApprovalRequest = agent.ApprovalRequest
	Decision        = agent.Decision
	Approver        = agent.Approver
)

// An agent run's modes, phases and event types (see package agent), and
// the most attempts and tool calls any door lets a run ask for (and the
// tool calls it gets when it asks for none).
const (
	ModeProgram, ModeTools, ModeAuto = agent.ModeProgram, agent.ModeTools, agent.ModeAuto
	PhaseTests, PhaseTool            = agent.PhaseTests, agent.PhaseTool

	EventAttemptStart, EventGenerated, EventChecked = agent.EventAttemptStart, agent.EventGenerated, agent.EventChecked
	EventExecuted, EventVerified, EventAccepted     = agent.EventExecuted, agent.EventVerified, agent.EventAccepted
	EventToolCall, EventToolResult, EventReplayed   = agent.EventToolCall, agent.EventToolResult, agent.EventReplayed
	EventDone                                       = agent.EventDone
	EventApprovalRequired, EventApproval            = agent.EventApprovalRequired, agent.EventApproval

	ApproveOff, ApproveAlways, ApproveOnFinding                    = agent.ApproveOff, agent.ApproveAlways, agent.ApproveOnFinding
	DecisionApprove, DecisionReject, DecisionStop, DecisionExpired = agent.DecisionApprove, agent.DecisionReject, agent.DecisionStop, agent.DecisionExpired

	MaxIterationsCeiling = agent.MaxIterationsCeiling
	MaxStepsCeiling      = agent.MaxStepsCeiling
	DefaultMaxSteps      = agent.DefaultMaxSteps
)

// HasTests reports whether a language takes tests (see agent.HasTests);
// TestLanguages names those that do.
func HasTests(language string) bool { return agent.HasTests(language) }
func TestLanguages() string         { return agent.TestLanguages() }

// Observers is one Observer telling each of obs (nil ones skipped).
func Observers(obs ...Observer) Observer { return agent.Observers(obs...) }
