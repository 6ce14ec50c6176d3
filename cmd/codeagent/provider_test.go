package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/llm"
	"github.com/codeagent/codeagent/llm/llmtest"
)

func providerEnv(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func parseProviderFlags(t *testing.T, args ...string) *providerFlags {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := addProviderFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestProviderFlagsLocalServerNeedsOnlyBaseURLAndModel(t *testing.T) {
	f := parseProviderFlags(t, "--base-url", "http://localhost:11434/v1", "--model", "llama3.1")
	cfg, err := f.resolve(providerEnv())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Provider != "openai" || cfg.BaseURL != "http://localhost:11434/v1" || cfg.Model != "llama3.1" || cfg.APIKey != "" {
		t.Errorf("cfg = %+v", cfg)
	}
	if d := describeProvider(cfg); !strings.Contains(d, "no key") {
		t.Errorf("describe = %q", d)
	}
}

func TestProviderFlagsOverrideEnvironment(t *testing.T) {
	f := parseProviderFlags(t, "--provider", "anthropic", "--model", "claude-x", "--llm-timeout", "30s")
	cfg, err := f.resolve(providerEnv("CODEAGENT_PROVIDER", "openai", "CODEAGENT_MODEL", "gpt", "ANTHROPIC_API_KEY", "sk-ant"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Provider != "anthropic" || cfg.Model != "claude-x" || cfg.APIKey != "sk-ant" || cfg.Timeout != 30*time.Second {
		t.Errorf("cfg = %+v", cfg)
	}
	if d := describeProvider(cfg); strings.Contains(d, "sk-ant") || !strings.Contains(d, "ANTHROPIC_API_KEY") {
		t.Errorf("describe = %q", d)
	}
}

func TestProviderFlagsErrorsAreUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  func(string) string
		want string
	}{
		{nil, providerEnv(), "set OPENAI_API_KEY"},
		{[]string{"--provider", "anthropic"}, providerEnv(), "set ANTHROPIC_API_KEY"},
		{[]string{"--provider", "mistral"}, providerEnv(), `unknown provider "mistral"`},
		{[]string{"--base-url", "http://localhost:8080/v1"}, providerEnv(), "pass --model"},
	} {
		_, err := parseProviderFlags(t, c.args...).resolve(c.env)
		var ue usageError
		if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want usage error containing %q", c.args, err, c.want)
		}
	}
}

func TestProviderEndToEndAgainstFakeServer(t *testing.T) {
	srv := llmtest.NewOpenAIServer(t, llmtest.Say("hello"))
	f := parseProviderFlags(t, "--base-url", srv.BaseURL, "--model", "llama3.1")
	cfg, err := f.resolve(providerEnv())
	if err != nil {
		t.Fatal(err)
	}
	var m llm.Meter
	p, err := newProvider(cfg, nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.Chat(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if err != nil || resp.Text != "hello" || m.Requests() != 1 {
		t.Fatalf("resp %+v err %v", resp, err)
	}
	if srv.Requests()[0].Model() != "llama3.1" {
		t.Errorf("model sent = %q", srv.Requests()[0].Model())
	}
	if !isProviderError(&llm.Error{Kind: llm.KindAuth}) || isProviderError(errors.New("x")) {
		t.Error("isProviderError")
	}
}
