package safety

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/codeagent/codeagent/internal/lazyre"
)

//go:embed default_policy.yaml
var defaultPolicyYAML []byte

// Mode says how imports are judged.
type Mode string

const (
	// ModeDeny forbids the listed modules and allows the rest.
	ModeDeny Mode = "deny"
	// ModeAllow allows only the listed modules.
	ModeAllow Mode = "allow"
)

// Policy is what the checker forbids. It is plain data, loaded from YAML;
// GoPolicy holds the Go rules' lists. A package pattern is an import path,
// or one ending in "/..." for a package and every package below it.
type GoPolicy struct {
	ForbiddenPackages []string `yaml:"forbidden_packages"` // deny mode
	AllowedPackages   []string `yaml:"allowed_packages"`   // allow mode
	// ForbiddenFunctions and EnvironmentFunctions are "import/path.Name";
	// any reference is reported.
	ForbiddenFunctions   []string `yaml:"forbidden_functions"`
	EnvironmentFunctions []string `yaml:"environment_functions"`
	// ForbiddenMethods are method names any reference to which on a value
	// is reported (p.Kill, (*T).Signal, v.MethodByName("Kill")); Signal
	// called with no argument is sync.Cond's and passes.
	ForbiddenMethods []string `yaml:"forbidden_methods"`
}

// DefaultPolicy returns the built-in one. Validate it before use (New does).
type Policy struct {
	Mode          Mode     `yaml:"mode"`
	Disable       []string `yaml:"disable"`         // rule ids switched off
	MaxInputBytes int      `yaml:"max_input_bytes"` // larger inputs are reported, not parsed
	// ParseMemoryPerByte bounds the memory a parse may hold: 128 MiB plus
	// this many bytes per input byte (0: 96). Code whose syntax tree needs
	// more is reported as too large or complex to check.
	ParseMemoryPerByte int `yaml:"parse_memory_per_byte"`
	MaxFindings        int `yaml:"max_findings"` // per file; the rest are summarised
	// EnvironmentNames are the environment variables a program may read
	// by name (Python's os.environ.get("HOME"), node's process.env.HOME):
	// those the run passes. Each language's own variables (package lang)
	// and the thread-pool sizes (sandbox.ThreadVars) count as listed.
	EnvironmentNames []string         `yaml:"environment_names"`
	Files            FilePolicy       `yaml:"files"`
	Python           PythonPolicy     `yaml:"python"`
	JavaScript       JavaScriptPolicy `yaml:"javascript"`
	Bash             BashPolicy       `yaml:"bash"`
	Go               GoPolicy         `yaml:"go"`
}

// FilePolicy says which paths outside the workspace code may name.
type FilePolicy struct {
	// AllowedAbsolute lists absolute paths allowed although they are outside
	// the workspace; an entry ending in "/" allows everything below it.
	AllowedAbsolute []string `yaml:"allowed_absolute"`
}

// PythonPolicy holds the Python rules' lists.
type PythonPolicy struct {
	ForbiddenModules   []string       `yaml:"forbidden_modules"`   // deny mode; a module and its submodules
	AllowedModules     []string       `yaml:"allowed_modules"`     // allow mode; a module and its submodules
	ForbiddenBuiltins  []string       `yaml:"forbidden_builtins"`  // any reference is reported
	AllowedDunders     []string       `yaml:"allowed_dunders"`     // other dunders are introspection
	IntrospectionNames []string       `yaml:"introspection_names"` // reported even inside strings
	FrameAttributes    []string       `yaml:"frame_attributes"`    // frame and traceback chains
	Deserializers      []Deserializer `yaml:"deserializers"`
	// FileFunctions are calls taking paths: a bare name (open, read_*)
	// is judged by its first argument whatever it is called on; a
	// qualified one (os.rename) by every positional argument.
	FileFunctions []string `yaml:"file_functions"` // "x*" is a prefix
	// ForbiddenFunctions are functions and attributes of allowed modules
	// (os.system, sys.modules) refused in any reference: an attribute, a
	// from-import, a getattr literal. "os.exec*" is a prefix.
	ForbiddenFunctions []string `yaml:"forbidden_functions"`
	// ReexportedFunctions do under an allowed module's name what a
	// forbidden module does (asyncio.create_subprocess_exec runs programs
	// as subprocess does); any reference is reported while that module is
	// not allowed.
	ReexportedFunctions []Reexport `yaml:"reexported_functions"`
}

// Reexport is a function or method Name (an attribute of any object, an
// imported or bare name, or a getattr literal) that does what Module does.
type Reexport struct {
	Name   string `yaml:"name"`
	Module string `yaml:"module"`
}

// Deserializer is a call that can run code while loading data. When Keyword
// is set the call is unsafe only depending on that keyword argument: it is
// safe when the keyword's source text is one of SafeValues, or when the
// keyword is absent and SafeIfAbsent is true.
type Deserializer struct {
	Call         string   `yaml:"call"` // qualified name, e.g. pandas.read_pickle
	Keyword      string   `yaml:"keyword"`
	SafeValues   []string `yaml:"safe_values"`
	SafeIfAbsent bool     `yaml:"safe_if_absent"`
}

// JavaScriptPolicy holds the JavaScript (node) rules' lists.
type JavaScriptPolicy struct {
	ForbiddenModules []string `yaml:"forbidden_modules"` // deny mode; "node:" prefixes are ignored
	AllowedModules   []string `yaml:"allowed_modules"`   // allow mode
	ForbiddenGlobals []string `yaml:"forbidden_globals"` // any reference is reported
	ForbiddenProcess []string `yaml:"forbidden_process"` // properties of process
}

// BashPolicy holds the bash rules' lists.
type BashPolicy struct {
	ForbiddenCommands []string `yaml:"forbidden_commands"`
	WriteCommands     []string `yaml:"write_commands"` // their path arguments must stay in the workspace
}

// DefaultPolicy returns a fresh copy of the built-in policy.
func DefaultPolicy() *Policy {
	var p Policy
	if err := decodeStrict(defaultPolicyYAML, &p); err != nil {
		panic("safety: built-in policy: " + err.Error())
	}
	return &p
}

// ParsePolicy decodes a YAML policy on top of the default one: keys present
// replace the defaults (lists are replaced whole), absent keys keep them.
// Unknown keys are errors. The result is validated.
func ParsePolicy(data []byte) (*Policy, error) {
	p := DefaultPolicy()
	if err := decodeStrict(data, p); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// LoadPolicy reads and parses a policy file (see ParsePolicy).
func LoadPolicy(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := ParsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

func decodeStrict(data []byte, p *Policy) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(p); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// FieldError is one invalid value in a policy.
type FieldError struct {
	Field  string // YAML path, e.g. python.forbidden_modules[3]
	Value  string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("policy: %s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("policy: %s: %q: %s", e.Field, e.Value, e.Reason)
}

var (
	dottedName  = lazyre.New(`^[\pL_][\pL\pN_]*(\.[\pL_][\pL\pN_]*)*$`)
	jsModule    = lazyre.New(`^[@a-zA-Z0-9_][a-zA-Z0-9_./@-]*$`)
	commandName = lazyre.New(`^[a-zA-Z0-9_.+-]+$`)
	goPackage   = lazyre.New(`^[\w.~+-]+(/[\w.~+-]+)*$`)
	goFunction  = lazyre.New(`^[\w.~+-]+(/[\w.~+-]+)*\.[\pL_][\pL\pN_]*$`)
	envName     = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Validate checks every field and returns all problems joined; each is a
// *FieldError (use errors.As).
func (p *Policy) Validate() error {
	var errs []error
	bad := func(field, value, reason string) {
		errs = append(errs, &FieldError{Field: field, Value: value, Reason: reason})
	}
	if p.Mode != ModeDeny && p.Mode != ModeAllow {
		bad("mode", string(p.Mode), `must be "deny" or "allow"`)
	}
	for i, id := range p.Disable {
		if _, ok := ruleCatalog[id]; !ok {
			bad(fmt.Sprintf("disable[%d]", i), id, "unknown rule id")
		}
	}
	if p.MaxInputBytes < 0 || p.MaxInputBytes > hardMaxInput {
		bad("max_input_bytes", fmt.Sprint(p.MaxInputBytes), fmt.Sprintf("must be between 0 (default) and %d", hardMaxInput))
	}
	if p.ParseMemoryPerByte < 0 || p.ParseMemoryPerByte > maxParseMemoryPerByte {
		bad("parse_memory_per_byte", fmt.Sprint(p.ParseMemoryPerByte), fmt.Sprintf("must be between 0 (default) and %d", maxParseMemoryPerByte))
	}
	if p.MaxFindings < 0 {
		bad("max_findings", fmt.Sprint(p.MaxFindings), "must not be negative (0 means the default)")
	}
	for i, a := range p.Files.AllowedAbsolute {
		if !strings.HasPrefix(a, "/") {
			bad(fmt.Sprintf("files.allowed_absolute[%d]", i), a, "must be an absolute path")
		}
	}
	names := func(field string, list []string, re *lazyre.Regexp, what string) {
		for i, s := range list {
			if !re.MatchString(s) {
				bad(fmt.Sprintf("%s[%d]", field, i), s, "must be "+what)
			}
		}
	}
	py := &p.Python
	names("python.forbidden_modules", py.ForbiddenModules, dottedName, "a dotted module name")
	names("python.allowed_modules", py.AllowedModules, dottedName, "a dotted module name")
	names("python.forbidden_builtins", py.ForbiddenBuiltins, dottedName, "an identifier")
	names("python.allowed_dunders", py.AllowedDunders, dottedName, "an identifier")
	names("python.introspection_names", py.IntrospectionNames, dottedName, "an identifier")
	names("python.frame_attributes", py.FrameAttributes, dottedName, "an identifier")
	for i, f := range py.FileFunctions {
		if !dottedName.MatchString(strings.TrimSuffix(f, "*")) {
			bad(fmt.Sprintf("python.file_functions[%d]", i), f, `must be a name, optionally ending in "*"`)
		}
	}
	for i, f := range py.ForbiddenFunctions {
		if n := strings.TrimSuffix(f, "*"); !dottedName.MatchString(n) || !strings.Contains(n, ".") {
			bad(fmt.Sprintf("python.forbidden_functions[%d]", i), f, `must be a qualified name such as os.system, optionally ending in "*"`)
		}
	}
	names("environment_names", p.EnvironmentNames, envName, "a variable name")
	for i, d := range py.Deserializers {
		field := fmt.Sprintf("python.deserializers[%d]", i)
		if !dottedName.MatchString(d.Call) || !strings.Contains(d.Call, ".") {
			bad(field+".call", d.Call, "must be a qualified name such as pickle.loads")
		}
		if d.Keyword == "" && (len(d.SafeValues) > 0 || d.SafeIfAbsent) {
			bad(field+".keyword", "", "safe_values and safe_if_absent need a keyword")
		}
		if d.Keyword != "" && !dottedName.MatchString(d.Keyword) {
			bad(field+".keyword", d.Keyword, "must be an identifier")
		}
	}
	for i, r := range py.ReexportedFunctions {
		field := fmt.Sprintf("python.reexported_functions[%d]", i)
		if !dottedName.MatchString(r.Name) || strings.Contains(r.Name, ".") {
			bad(field+".name", r.Name, "must be an identifier")
		}
		if !dottedName.MatchString(r.Module) {
			bad(field+".module", r.Module, "must be a dotted module name")
		}
	}
	js := &p.JavaScript
	names("javascript.forbidden_modules", js.ForbiddenModules, jsModule, "a module name")
	names("javascript.allowed_modules", js.AllowedModules, jsModule, "a module name")
	names("javascript.forbidden_globals", js.ForbiddenGlobals, dottedName, "an identifier")
	names("javascript.forbidden_process", js.ForbiddenProcess, dottedName, "an identifier")
	names("bash.forbidden_commands", p.Bash.ForbiddenCommands, commandName, "a command name")
	names("bash.write_commands", p.Bash.WriteCommands, commandName, "a command name")
	names("go.forbidden_packages", p.Go.ForbiddenPackages, goPackage, `an import path, optionally ending in "/..."`)
	names("go.allowed_packages", p.Go.AllowedPackages, goPackage, `an import path, optionally ending in "/..."`)
	names("go.forbidden_functions", p.Go.ForbiddenFunctions, goFunction, "a qualified name such as os.StartProcess")
	names("go.environment_functions", p.Go.EnvironmentFunctions, goFunction, "a qualified name such as os.Getenv")
	names("go.forbidden_methods", p.Go.ForbiddenMethods, dottedName, "a method name such as Kill")
	return errors.Join(errs...)
}

// disabled reports whether rule is switched off.
func (p *Policy) disabled(rule string) bool { return slices.Contains(p.Disable, rule) }
