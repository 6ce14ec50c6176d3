package manifest

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/codeagent/codeagent/deps"
	"github.com/codeagent/codeagent/sandbox"
)

// collectLines records the line of every mapping key and sequence item
// below n, by field path.
func collectLines(n *yaml.Node, path string, lines map[string]int) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			collectLines(c, path, lines)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			lines[p] = n.Content[i].Line
			collectLines(n.Content[i+1], p, lines)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			lines[p] = c.Line
			collectLines(c, p, lines)
		}
	}
}

// errAt builds a FieldError for a field path, at its line (or its parent's).
func (m *Manifest) errAt(field, format string, a ...any) error {
	line := 0
	for p := field; p != ""; {
		if l, ok := m.lines[p]; ok {
			line = l
			break
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return &FieldError{File: m.file, Line: line, Field: field, Msg: fmt.Sprintf(format, a...)}
}

// Validate checks every field and returns all problems joined.
func (m *Manifest) Validate() error {
	var errs []error
	a := m.Agent
	if _, ok := m.lines["agent"]; !ok && m.lines != nil {
		errs = append(errs, &FieldError{File: m.file, Line: 1, Field: "agent", Msg: "missing: the manifest's settings live under the agent key"})
	}
	if a.Provider != "" && a.Provider != "openai" && a.Provider != "anthropic" {
		errs = append(errs, m.errAt("agent.provider", "unknown provider %q (want openai or anthropic)", a.Provider))
	}
	switch a.Backend {
	case "", "auto", "namespace", "docker":
	default:
		errs = append(errs, m.errAt("agent.backend", "unknown backend %q (want auto, namespace or docker)", a.Backend))
	}
	if a.Workspace != "" && filepath.Clean(a.Workspace) != sandbox.WorkspacePath {
		errs = append(errs, m.errAt("agent.workspace", "programs always see their workspace at %s; got %q", sandbox.WorkspacePath, a.Workspace))
	}
	errs = append(errs, m.validateNetwork()...)
	if fs := a.Permissions.Filesystem; fs != "" && fs != "workspace_only" {
		errs = append(errs, m.errAt("agent.permissions.filesystem", "only \"workspace_only\" is supported, got %q", fs))
	}
	seen := map[string]bool{}
	for i, t := range a.Tools {
		field := fmt.Sprintf("agent.tools[%d]", i)
		if _, ok := toolLanguages[t.Name]; !ok {
			errs = append(errs, m.errAt(field+".name", "unknown tool %q (want %s)", t.Name, strings.Join(toolNames(), ", ")))
		}
		if seen[t.Name] {
			errs = append(errs, m.errAt(field+".name", "tool %q is listed twice", t.Name))
		}
		seen[t.Name] = true
		if t.Timeout < 0 || time.Duration(t.Timeout) > 24*time.Hour {
			errs = append(errs, m.errAt(field+".timeout", "must be between 0 and 24h"))
		}
		if t.MemoryLimit < 0 || (t.MemoryLimit > 0 && t.MemoryLimit < 16<<20) {
			errs = append(errs, m.errAt(field+".memory_limit", "must be at least 16MiB"))
		}
		if t.DiskLimit < 0 {
			errs = append(errs, m.errAt(field+".disk_limit", "must not be negative"))
		}
		if t.CPUs != t.CPUs || t.CPUs < 0 || t.CPUs > sandbox.MaxCPUs || (t.CPUs > 0 && t.CPUs < 0.01) {
			errs = append(errs, m.errAt(field+".cpus", "must be between 0.01 and %d cores", sandbox.MaxCPUs))
		}
		if t.Processes < 0 {
			errs = append(errs, m.errAt(field+".processes", "must not be negative"))
		}
	}
	if a.Limits.MaxIterations < 0 || a.Limits.MaxIterations > 100 {
		errs = append(errs, m.errAt("agent.limits.max_iterations", "must be between 1 and 100"))
	}
	if a.Limits.ExecutionsPerMinute < 0 {
		errs = append(errs, m.errAt("agent.limits.executions_per_minute", "must not be negative"))
	}
	errs = append(errs, m.validateDependencies()...)
	if a.Policy.Path != "" && a.Policy.Inline != nil {
		errs = append(errs, m.errAt("agent.policy", "give a path or a mapping, not both"))
	}
	return errors.Join(errs...)
}

func toolNames() []string {
	var out []string
	for n := range toolLanguages {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ToolFor returns the tool that runs lang, or an error naming the tool when
// the manifest does not list it. A manifest with no tools allows none.
func (m *Manifest) ToolFor(lang string) (Tool, error) {
	name := ToolName(lang)
	for _, t := range m.Agent.Tools {
		if t.Name == name {
			return t, nil
		}
	}
	return Tool{}, fmt.Errorf("tool %s is not allowed by the manifest %s (it lists: %s)", name, m.file, m.listed())
}

// ToolLanguages are the languages of the execute tools the manifest
// lists, in its order.
func (m *Manifest) ToolLanguages() []string {
	var out []string
	for _, t := range m.Agent.Tools {
		if l, ok := toolLanguages[t.Name]; ok {
			out = append(out, l)
		}
	}
	return out
}

func (m *Manifest) listed() string {
	var names []string
	for _, t := range m.Agent.Tools {
		names = append(names, t.Name)
	}
	if len(names) == 0 {
		return "no tools"
	}
	return strings.Join(names, ", ")
}

// Limits returns l with the tool's limits applied over it.
func (t Tool) Limits(l sandbox.Limits) sandbox.Limits {
	if t.Timeout > 0 {
		l.WallTime = time.Duration(t.Timeout)
	}
	if t.MemoryLimit > 0 {
		l.Memory = int64(t.MemoryLimit)
	}
	if t.DiskLimit > 0 {
		l.Disk = int64(t.DiskLimit)
	}
	if t.Processes > 0 {
		l.Processes = t.Processes
	}
	if t.CPUs > 0 {
		l.CPUs = t.CPUs
	}
	return l
}

// PolicyPath resolves a policy path relative to the manifest's directory.
func (m *Manifest) PolicyPath() string {
	p := m.Agent.Policy.Path
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(m.file), p)
}

// File is the path the manifest was read from.
func (m *Manifest) File() string { return m.file }

// validateDependencies checks agent.dependencies and
// permissions.install as package deps reads them.
func (m *Manifest) validateDependencies() []error {
	var errs []error
	d := m.Agent.Dependencies
	for i, r := range d.Python {
		if _, err := deps.ProjectName(r); err != nil {
			errs = append(errs, m.errAt(fmt.Sprintf("agent.dependencies.python[%d]", i), "%v", err))
		}
	}
	for i, spec := range d.JavaScript {
		if _, err := deps.NPMName(spec); err != nil {
			errs = append(errs, m.errAt(fmt.Sprintf("agent.dependencies.javascript[%d]", i), "%v", err))
		}
	}
	if d.NPMRegistry != "" {
		if _, err := (deps.Request{JavaScript: []string{"x"}, NPMRegistry: d.NPMRegistry}).Normalize(); err != nil {
			errs = append(errs, m.errAt("agent.dependencies.npm_registry", "%v", err))
		}
	}
	if d.IndexURL != "" && d.FindLinks != "" {
		errs = append(errs, m.errAt("agent.dependencies", "give index_url or find_links, not both"))
	}
	if d.IndexURL != "" {
		if _, err := (deps.Request{Python: []string{"x"}, IndexURL: d.IndexURL}).Normalize(); err != nil {
			errs = append(errs, m.errAt("agent.dependencies.index_url", "%v", err))
		}
	}
	for i, name := range m.Agent.Permissions.Install {
		if name == "*" && len(m.Agent.Permissions.Install) == 1 {
			continue
		}
		if p, err := deps.ProjectName(name); err != nil || p != deps.NormalizeName(name) {
			errs = append(errs, m.errAt(fmt.Sprintf("agent.permissions.install[%d]", i), "%q is not a package name", name))
		}
	}
	return errs
}

// DependencyRequest is what agent.dependencies asks for (FindLinks made
// absolute beside the manifest); empty when it asks for nothing.
func (m *Manifest) DependencyRequest() deps.Request {
	d := m.Agent.Dependencies
	r := deps.Request{Python: append([]string(nil), d.Python...), IndexURL: d.IndexURL,
		JavaScript: append([]string(nil), d.JavaScript...), NPMRegistry: d.NPMRegistry}
	if d.FindLinks != "" {
		r.FindLinks = d.FindLinks
		if !filepath.IsAbs(r.FindLinks) {
			r.FindLinks = filepath.Join(filepath.Dir(m.file), d.FindLinks)
		}
	}
	return r
}
