package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/sandbox"
)

func TestReferenceExampleValidates(t *testing.T) {
	m, err := Load("testdata/reference.yaml")
	if err != nil {
		t.Fatalf("the reference design's example must validate as it stands: %v", err)
	}
	tool, err := m.ToolFor("python")
	if err != nil {
		t.Fatal(err)
	}
	lim := tool.Limits(sandbox.DefaultLimits())
	if lim.WallTime != 60*time.Second || lim.Memory != 1_000_000_000 {
		t.Fatalf("limits %+v", lim)
	}
	if m.Agent.Model != "gpt-4" || m.Agent.Name != "data-analyzer" {
		t.Fatalf("agent %+v", m.Agent)
	}
}

func TestFullExample(t *testing.T) {
	m, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	py, _ := m.ToolFor("python")
	lim := py.Limits(sandbox.Limits{})
	if lim.WallTime != 2*time.Minute || lim.Memory != 512<<20 || lim.Disk != 200<<20 || lim.Processes != 32 {
		t.Fatalf("python limits %+v", lim)
	}
	sh, _ := m.ToolFor("bash")
	if time.Duration(sh.Timeout) != 10*time.Second {
		t.Fatalf("bash timeout %v", sh.Timeout)
	}
	if m.PolicyPath() != filepath.Join("testdata", "policy.yaml") || m.Agent.Limits.ExecutionsPerMinute != 20 {
		t.Fatalf("policy %q limits %+v", m.PolicyPath(), m.Agent.Limits)
	}
}

func TestToolNotListedIsRefused(t *testing.T) {
	m, err := Load("testdata/reference.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.ToolFor("javascript")
	if err == nil || !strings.Contains(err.Error(), "execute_javascript") || !strings.Contains(err.Error(), "execute_python") {
		t.Fatalf("refusal: %v", err)
	}
}

func TestInlinePolicy(t *testing.T) {
	m, err := Parse("m.yaml", []byte("agent:\n  tools: [{name: execute_python}]\n  policy:\n    mode: allow\n    python:\n      allowed_modules: [pandas]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m.Agent.Policy.Inline), "allowed_modules") {
		t.Fatalf("inline policy %q", m.Agent.Policy.Inline)
	}
}

// TestErrorsNameFileLineAndField checks the location of every kind of error.
func TestErrorsNameFileLineAndField(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown field", "agent:\n  name: x\n  modle: gpt-4\n", "m.yaml:3: field modle not found"},
		{"unknown nested field", "agent:\n  tools:\n    - name: execute_python\n      timout: 5\n", "m.yaml:4: field timout not found"},
		{"bad duration", "agent:\n  tools:\n    - name: execute_python\n      timeout: soon\n", "m.yaml:4: invalid duration \"soon\""},
		{"bad size", "agent:\n  tools:\n    - name: execute_python\n      memory_limit: lots\n", "m.yaml:4: invalid size \"lots\""},
		{"network true", "agent:\n  permissions:\n    network: true\n", "m.yaml:3: agent.permissions.network: true names no host"},
		{"network rule", "agent:\n  permissions:\n    network:\n      allow:\n        - pypi.org\n        - \"*\"\n", "m.yaml:6: agent.permissions.network.allow[1]: allow \"*\""},
		{"network empty", "agent:\n  permissions:\n    network:\n      allow: []\n", "m.yaml:4: agent.permissions.network.allow: lists no host"},
		{"network field", "agent:\n  permissions:\n    network:\n      hosts: [a.com]\n", "m.yaml:4: field hosts not found"},
		{"network size", "agent:\n  permissions:\n    network:\n      allow: [a.com]\n      max_bytes: lots\n", "m.yaml:5: invalid size"},
		{"filesystem", "agent:\n  permissions:\n    filesystem: everything\n", "m.yaml:3: agent.permissions.filesystem"},
		{"unknown tool", "agent:\n  tools:\n    - name: execute_ruby\n", "m.yaml:3: agent.tools[0].name: unknown tool \"execute_ruby\""},
		{"duplicate tool", "agent:\n  tools:\n    - name: execute_bash\n    - name: execute_bash\n", "m.yaml:4: agent.tools[1].name: tool \"execute_bash\" is listed twice"},
		{"provider", "agent:\n  provider: acme\n", "m.yaml:2: agent.provider: unknown provider"},
		{"backend", "agent:\n  backend: vm\n", "m.yaml:2: agent.backend: unknown backend"},
		{"workspace", "agent:\n  workspace: /data\n", "m.yaml:2: agent.workspace"},
		{"small memory", "agent:\n  tools:\n    - name: execute_python\n      memory_limit: 1KB\n", "m.yaml:4: agent.tools[0].memory_limit"},
		{"no agent key", "name: x\n", "m.yaml:1: field name not found"},
		{"empty", "", "m.yaml: the manifest is empty"},
		{"syntax", "agent:\n  name: [unclosed\n", "m.yaml:"},
		{"wrong type", "agent:\n  limits:\n    max_iterations: many\n", "m.yaml:3:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("m.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("not a *FieldError: %T", err)
			}
		})
	}
}

func TestDocumentedExampleValidates(t *testing.T) {
	doc, err := os.ReadFile("../docs/MANIFEST.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(doc), "```yaml\n")
	if len(blocks) < 2 {
		t.Fatal("docs/MANIFEST.md has no yaml example")
	}
	for i, b := range blocks[1:] {
		example, _, _ := strings.Cut(b, "```")
		if _, err := Parse("MANIFEST.md example", []byte(example)); err != nil {
			t.Errorf("example %d does not validate: %v", i+1, err)
		}
	}
}

func TestNetworkPermission(t *testing.T) {
	m, err := Parse("m.yaml", []byte("agent:\n  permissions:\n    network:\n      allow: [\"api.example.com\", \"*.github.com:443\"]\n      max_bytes: 50MiB\n"))
	if err != nil {
		t.Fatal(err)
	}
	n := m.Network()
	if n == nil || len(n.Allow) != 2 || n.Allow[1] != "*.github.com:443" || n.MaxBytes != 50<<20 {
		t.Fatalf("network %+v", n)
	}
	for _, off := range []string{"agent:\n  permissions:\n    network: false\n", "agent:\n  name: x\n"} {
		m, err := Parse("m.yaml", []byte(off))
		if err != nil || m.Network() != nil {
			t.Fatalf("%q: %v %+v", off, err, m.Network())
		}
	}
}

// agent.dependencies.javascript and npm_registry are checked as package
// deps reads them, each error at its place.
func TestJavaScriptDependencies(t *testing.T) {
	dir := t.TempDir()
	write := func(yaml string) string {
		p := filepath.Join(dir, "codeagent.yaml")
		if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	m, err := Load(write("agent:\n  tools: [{name: execute_javascript}]\n  dependencies:\n    javascript: [kiwi@1.0.0, '@birds/emu']\n    npm_registry: http://127.0.0.1:9/\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := m.DependencyRequest()
	if strings.Join(r.JavaScript, " ") != "kiwi@1.0.0 @birds/emu" || r.NPMRegistry != "http://127.0.0.1:9/" || len(r.Python) != 0 {
		t.Errorf("request %+v", r)
	}
	_, err = Load(write("agent:\n  tools: [{name: execute_javascript}]\n  dependencies:\n    javascript: [kiwi, 'moa@git+https://evil.test/m.git']\n    npm_registry: ftp://x/\n"))
	if err == nil || !strings.Contains(err.Error(), "agent.dependencies.javascript[1]") || !strings.Contains(err.Error(), "agent.dependencies.npm_registry") {
		t.Errorf("refusal: %v", err)
	}
}
