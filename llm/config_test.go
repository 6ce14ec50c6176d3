package llm

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestResolve(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     func(string) string
		o       Overrides
		want    Config // only the checked fields
		wantErr string
	}{
		{name: "hosted openai with key", env: env("OPENAI_API_KEY", "sk-1"),
			want: Config{Provider: "openai", BaseURL: "https://api.openai.com/v1", Model: "gpt-4o-mini", APIKey: "sk-1"}},
		{name: "ollama by flags only", env: env(), o: Overrides{BaseURL: "http://localhost:11434/v1", Model: "llama3.1"},
			want: Config{Provider: "openai", BaseURL: "http://localhost:11434/v1", Model: "llama3.1"}},
		{name: "env base url and model", env: env("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1", "CODEAGENT_MODEL", "qwen"),
			want: Config{Provider: "openai", BaseURL: "http://127.0.0.1:8000/v1", Model: "qwen"}},
		{name: "flags beat env", env: env("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1", "CODEAGENT_MODEL", "qwen"),
			o:    Overrides{BaseURL: "http://[::1]:1234/v1", Model: "phi"},
			want: Config{Provider: "openai", BaseURL: "http://[::1]:1234/v1", Model: "phi"}},
		{name: "anthropic from env", env: env("CODEAGENT_PROVIDER", "Anthropic", "ANTHROPIC_API_KEY", "k", "OPENAI_BASE_URL", "http://localhost:1/v1"),
			want: Config{Provider: "anthropic", BaseURL: "https://api.anthropic.com", Model: "claude-sonnet-4-5", APIKey: "k"}},
		{name: "provider flag beats env", env: env("CODEAGENT_PROVIDER", "anthropic", "OPENAI_API_KEY", "sk"), o: Overrides{Provider: "openai"},
			want: Config{Provider: "openai", APIKey: "sk"}},
		{name: "missing key", env: env(), wantErr: "no API key for openai: set OPENAI_API_KEY, or point --base-url at a local server"},
		{name: "missing anthropic key", env: env(), o: Overrides{Provider: "anthropic"}, wantErr: "set ANTHROPIC_API_KEY"},
		{name: "remote custom url needs key", env: env(), o: Overrides{BaseURL: "https://openrouter.ai/api/v1", Model: "m"}, wantErr: "no API key"},
		{name: "unknown provider", env: env(), o: Overrides{Provider: "gemini"}, wantErr: `unknown provider "gemini"`},
		{name: "custom url needs a model", env: env(), o: Overrides{BaseURL: "http://localhost:11434/v1"}, wantErr: "no model for http://localhost:11434/v1: pass --model"},
		{name: "bad url", env: env(), o: Overrides{BaseURL: "localhost:11434", Model: "m"}, wantErr: "not an http(s) URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Resolve(c.env, c.o)
			if c.wantErr != "" {
				var fe *FieldError
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !errors.As(err, &fe) {
					t.Fatalf("err = %v, want a FieldError containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Provider != c.want.Provider || (c.want.BaseURL != "" && got.BaseURL != c.want.BaseURL) ||
				(c.want.Model != "" && got.Model != c.want.Model) || got.APIKey != c.want.APIKey {
				t.Errorf("got %+v", got)
			}
		})
	}
}

func TestResolveUnknownProviderIsOneSentence(t *testing.T) {
	_, err := Resolve(env(), Overrides{Provider: "gemini"})
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("err = %q", err)
	}
}

func TestResolveTimeoutAndDefaults(t *testing.T) {
	c, err := Resolve(env("OPENAI_API_KEY", "k"), Overrides{Timeout: time.Second})
	if err != nil || c.Timeout != time.Second || c.MaxTokens != 4096 || c.Retry.MaxAttempts != 4 || c.KeyVar != "OPENAI_API_KEY" {
		t.Errorf("c = %+v, err = %v", c, err)
	}
}

func TestIsLocalURL(t *testing.T) {
	for u, want := range map[string]bool{
		"http://localhost:11434/v1":   true,
		"http://127.0.0.1:8080":       true,
		"http://[::1]:1234/v1":        true,
		"http://192.168.1.20:8000/v1": true,
		"http://10.0.0.5/v1":          true,
		"http://172.20.0.3:11434":     true,
		"http://ollama:11434/v1":      true,
		"http://gpu-box.local:8000":   true,
		"http://0.0.0.0:8000":         true,
		"https://api.openai.com/v1":   false,
		"https://api.anthropic.com":   false,
		"https://8.8.8.8/v1":          false,
		"https://openrouter.ai/api":   false,
		"::not a url":                 false,
	} {
		if got := IsLocalURL(u); got != want {
			t.Errorf("IsLocalURL(%q) = %v, want %v", u, got, want)
		}
	}
}

func TestEndpointModelsHint(t *testing.T) {
	if h := (Config{Provider: "openai", BaseURL: "http://localhost:11434/v1"}).Endpoint().ModelsHint; h != "`ollama list`" {
		t.Errorf("ollama hint = %q", h)
	}
	if h := (Config{Provider: "openai", BaseURL: "http://h:8000/v1/"}).Endpoint().ModelsHint; h != "GET http://h:8000/v1/models" {
		t.Errorf("hint = %q", h)
	}
}
