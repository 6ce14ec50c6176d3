package app

import (
	"strings"

	"github.com/codeagent/codeagent/agent"
	"github.com/codeagent/codeagent/kernel"
	"github.com/codeagent/codeagent/lang"
	"github.com/codeagent/codeagent/sandbox"
)

// The rules of a request, written once for every door: each door decodes
// its input into a RunRequest, a Program or a CellRequest and calls its
// Validate before anything runs, so that the same request is refused with
// the same message at the command line (exit 2), over HTTP (400) and over
// MCP (a tool error). Errors are of class Invalid. What a door sets itself
// (the size of a body, a server's ceiling of limits) stays the door's.

// MaxTaskLen is the most bytes a run's task may have.
const MaxTaskLen = 64 << 10

// Validate checks a run as a door decoded it: a task, budgets within the
// ceilings (0 takes the default), a known mode and language, tests
// (test-driven mode's or the caller's) only for a language that has them
// and not in tool mode, and no network in tool mode (its kernel has none).
func (r RunRequest) Validate() error {
	c := r.Config
	switch {
	case strings.TrimSpace(r.Task) == "":
		return invalidf("a task is required")
	case len(r.Task) > MaxTaskLen:
		return invalidf("the task is longer than %d bytes", MaxTaskLen)
	case c.MaxIterations < 0 || c.MaxIterations > agent.MaxIterationsCeiling:
		return invalidf("max_iterations %d: want 1 to %d", c.MaxIterations, agent.MaxIterationsCeiling)
	case c.MaxSteps < 0 || c.MaxSteps > agent.MaxStepsCeiling:
		return invalidf("max_steps %d: want 1 to %d", c.MaxSteps, agent.MaxStepsCeiling)
	case c.Mode != "" && c.Mode != agent.ModeProgram && c.Mode != agent.ModeTools && c.Mode != agent.ModeAuto:
		return invalidf("mode %q: want program, tools or auto", c.Mode)
	case !agent.ValidApprove(c.Approve):
		return invalidf("approve %q: want always or on-finding", c.Approve)
	}
	name := "python"
	if c.Lang != "" {
		l, err := LookupLanguage(c.Lang)
		if err != nil {
			return err
		}
		name = l.Name
	}
	tests := c.Tests || r.TestCode != ""
	switch {
	case c.Tests && !agent.HasTests(name):
		return invalidf("test-driven mode needs %s, not %s", agent.TestLanguages(), name)
	case r.TestCode != "" && !agent.HasTests(name):
		return invalidf("tests need %s, not %s", agent.TestLanguages(), name)
	case tests && c.Mode == agent.ModeTools:
		return invalidf("mode tools takes no tests: use mode program (or auto) with tests")
	case c.Network != nil && c.Mode == agent.ModeTools:
		return invalidf("mode tools runs Python in a kernel without network: use mode program (or auto) with network")
	}
	return nil
}

// LookupLanguage is the language a client names by any name or alias
// package lang knows, or an error of class Invalid listing them.
func LookupLanguage(name string) (lang.Language, error) {
	l, err := lang.Lookup(name)
	if err != nil {
		return l, invalidf("%v", err)
	}
	return l, nil
}

// Validate checks a program as a door decoded it: a language, code, an
// environment CheckEnv accepts and limits no lower than MinLimits. The
// door's own ceiling of limits is the door's to check.
func (p Program) Validate() error {
	switch {
	case p.Lang.Name == "":
		return invalidf("a language is required")
	case strings.TrimSpace(string(p.Code)) == "":
		return invalidf("the program is empty")
	}
	if err := CheckEnv(p.Env); err != nil {
		return err
	}
	return CheckMin(p.Limits)
}

// CellRequest is a cell for a session's kept kernel as a door decoded it:
// POST /v1/sessions/{id}/exec with state keep, MCP's execute_code with
// keep_state. A kernel runs Python with the environment, limits and
// packages it started with and no network, so a cell takes code, stdin
// and a timeout only.
type CellRequest struct {
	// Language is the client's name for it, any of Python's.
	Language    string
	Code, Stdin string
	// Limits are those the request set (zero fields: not set); only
	// WallTime, the cell's timeout, applies to a cell.
	Limits sandbox.Limits
	// What a fresh program may be given and a cell may not.
	Env          map[string]string
	AllowHosts   []string
	Dependencies *DependenciesRequest
}

// Validate checks a cell as a door decoded it: Python, code within the
// kernel's bounds, a timeout no lower than MinLimits', and nothing a kernel
// fixes when it starts.
func (c CellRequest) Validate() error {
	l, err := LookupLanguage(c.Language)
	if err != nil {
		return err
	}
	switch {
	case l.Name != "python":
		return invalidf("keep state runs Python only: a session's kernel is Python")
	case strings.TrimSpace(c.Code) == "":
		return invalidf("the cell is empty")
	case len(c.Code) > kernel.MaxCode || len(c.Stdin) > kernel.MaxCode:
		return invalidf("a cell's code and stdin are limited to %s each", sandbox.FormatSize(kernel.MaxCode))
	}
	if err := CheckMin(c.Limits); err != nil {
		return err
	}
	d := c.Dependencies
	switch {
	case c.Limits != (sandbox.Limits{WallTime: c.Limits.WallTime}):
		return invalidf("with keep state only the timeout applies: a kernel's other limits are the server's")
	case len(c.Env) > 0:
		return invalidf("keep state takes no environment: a kernel's is the server's")
	case len(c.AllowHosts) > 0:
		return invalidf("keep state has no network: a kernel reaches no host")
	case d != nil && (len(d.Python) > 0 || len(d.JavaScript) > 0):
		return invalidf("keep state takes no dependencies: a kernel's packages are fixed when it starts")
	}
	return nil
}
