// Package manifest reads the YAML manifest that declares what an agent may
// do: its model, its tools with their limits, its permissions, the safety
// policy and run limits. Everything is validated before anything runs;
// every error names the file, the line and the field.
package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/codeagent/codeagent/sandbox"
)

// Manifest is the whole file; everything lives under the agent key.
type Manifest struct {
	Agent Agent `yaml:"agent"`

	file  string
	lines map[string]int // field path ("agent.tools[0].timeout") -> line
}

// Agent declares one agent.
type Agent struct {
	Name     string `yaml:"name"`
	Model    string `yaml:"model"`
	Provider string `yaml:"provider"`
	// Backend is the sandbox backend: auto, namespace or docker.
	Backend     string      `yaml:"backend"`
	Workspace   string      `yaml:"workspace"`
	Tools       []Tool      `yaml:"tools"`
	Permissions Permissions `yaml:"permissions"`
	// Dependencies are installed before the agent's first program runs.
	Dependencies Dependencies `yaml:"dependencies"`
	// Policy is the safety checker's policy: a path to a policy file
	// (relative to the manifest) or the policy itself as a mapping.
	Policy Policy `yaml:"policy"`
	Limits Limits `yaml:"limits"`
	// Review names a reviewer model asked before each execution
	// (docs/APPROVALS.md); its key is in CODEAGENT_REVIEW_API_KEY when it
	// has an endpoint of its own.
	Review Review `yaml:"review"`
}

// Review is agent.review: the reviewer model and, optionally, its own
// endpoint and protocol.
type Review struct {
	Model    string `yaml:"model"`
	BaseURL  string `yaml:"base_url"`
	Provider string `yaml:"provider"`
}

// Tool is one execution tool: execute_python, execute_javascript or
// execute_bash.
type Tool struct {
	Name        string   `yaml:"name"`
	Timeout     Duration `yaml:"timeout"`
	MemoryLimit Size     `yaml:"memory_limit"`
	DiskLimit   Size     `yaml:"disk_limit"`
	Processes   int      `yaml:"processes"`
	CPUs        float64  `yaml:"cpus"`
}

// Permissions are what a program may reach: no network, or the hosts of
// an allow list (see Network); only its workspace of the file system.
type Permissions struct {
	Network    Network `yaml:"network"`
	Filesystem string  `yaml:"filesystem"`
	// Install names the Python projects a run's program may declare to
	// be installed (docs/DEPENDENCIES.md): a list, or "*" for any.
	Install InstallList `yaml:"install"`
}

// InstallList is permissions.install: project names, or ["*"].
type InstallList []string

// UnmarshalYAML accepts "*" or a sequence of names.
func (l *InstallList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value != "*" {
			return fmt.Errorf("line %d: permissions.install is a list of package names, or \"*\" for any", n.Line)
		}
		*l = InstallList{"*"}
		return nil
	}
	var names []string
	if err := n.Decode(&names); err != nil {
		return err
	}
	*l = names
	return nil
}

// Dependencies are the Python and npm packages every program of the
// agent gets (of its language), installed once (docs/DEPENDENCIES.md).
type Dependencies struct {
	Python   []string `yaml:"python"`
	IndexURL string   `yaml:"index_url"`
	// FindLinks is a directory of wheels, relative to the manifest.
	FindLinks   string   `yaml:"find_links"`
	JavaScript  []string `yaml:"javascript"`
	NPMRegistry string   `yaml:"npm_registry"`
}

// Limits bound an agent's runs.
type Limits struct {
	MaxIterations       int `yaml:"max_iterations"`
	ExecutionsPerMinute int `yaml:"executions_per_minute"`
}

// Policy holds either a path or an inline policy document.
type Policy struct {
	Path   string
	Inline []byte // YAML of the inline mapping
}

// UnmarshalYAML accepts a string (a path) or a mapping (the policy).
func (p *Policy) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		p.Path = n.Value
		return nil
	case yaml.MappingNode:
		b, err := yaml.Marshal(n)
		if err != nil {
			return err
		}
		p.Inline = b
		return nil
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: policy must be a file path or a mapping", n.Line)}}
}

// Tools codeagent knows, by language.
var toolLanguages = map[string]string{
	"execute_python":     "python",
	"execute_javascript": "javascript",
	"execute_bash":       "bash",
	"execute_go":         "go",
}

// ToolName is the manifest's name of the tool that runs lang.
func ToolName(lang string) string {
	for name, l := range toolLanguages {
		if l == lang {
			return name
		}
	}
	return "execute_" + lang
}

// FieldError is a validation error at a place in the file.
type FieldError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Msg)
	}
	return fmt.Sprintf("%s: %s", loc, e.Msg)
}

// Load reads and validates the manifest at path.
func Load(path string) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes and validates a manifest; name is used in errors.
func Parse(name string, data []byte) (*Manifest, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &FieldError{File: name, Msg: "the manifest is empty: settings live under the agent key"}
		}
		return nil, yamlError(name, err)
	}
	m := &Manifest{file: name}
	dec = yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // an unknown field is a mistake, not an extension
	if err := dec.Decode(m); err != nil {
		return nil, yamlError(name, err)
	}
	m.lines = map[string]int{}
	collectLines(&root, "", m.lines)
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// yamlError turns yaml.v3's "line N: msg" errors into FieldErrors.
func yamlError(file string, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		var errs []error
		for _, e := range te.Errors {
			errs = append(errs, lineError(file, e))
		}
		return errors.Join(errs...)
	}
	return lineError(file, strings.TrimPrefix(err.Error(), "yaml: "))
}

func lineError(file, msg string) error {
	msg = strings.TrimPrefix(msg, "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, after, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				return &FieldError{File: file, Line: n, Msg: after}
			}
		}
	}
	return &FieldError{File: file, Msg: msg}
}

// Duration accepts seconds as a number (60) or a Go duration ("60s", "1m").
type Duration time.Duration

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a duration such as 60 or \"60s\"", n.Line)
	}
	if secs, err := strconv.ParseFloat(n.Value, 64); err == nil {
		*d = Duration(time.Duration(secs * float64(time.Second)))
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: invalid duration %q: want seconds (60) or a duration (\"60s\", \"2m\")", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// Size accepts bytes as a number or a size with a unit ("1GB", "256MiB").
type Size int64

func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a size such as \"1GB\" or \"256MiB\"", n.Line)
	}
	v, err := sandbox.ParseSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %v", n.Line, err)
	}
	*s = Size(v)
	return nil
}
