package egress

import (
	"context"
	_ "embed"
	"fmt"
	"maps"
	"net/netip"
	"strconv"
	"strings"

	"github.com/codeagent/codeagent/sandbox"
)

// fetchPreload makes node's fetch use the proxy (see fetch-proxy.js).
//
//go:embed fetch-proxy.js
var fetchPreload []byte

// PreloadPath is where the preload is placed in the sandbox.
const PreloadPath = "/code/.codeagent/fetch-proxy.js"

// Wrap returns a sandbox that gives programs with a Spec.Network their
// proxy: one per execution, reached at 127.0.0.1:ProxyPort of the
// sandbox's loopback, with the environment that ordinary clients read.
// Specs without a Network pass through unchanged: no network at all.
func Wrap(sb sandbox.Sandbox) sandbox.Sandbox {
	if _, ok := sb.(*Sandbox); ok {
		return sb
	}
	return &Sandbox{Sandbox: sb}
}

// Sandbox is the decorator Wrap returns.
type Sandbox struct {
	sandbox.Sandbox
	// Lookup replaces the host's resolver (tests).
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Unwrap returns the backend underneath.
func (s *Sandbox) Unwrap() sandbox.Sandbox { return s.Sandbox }

// Run implements sandbox.Sandbox.
func (s *Sandbox) Run(ctx context.Context, spec sandbox.Spec) (sandbox.Result, error) {
	if spec.Network == nil {
		return s.Sandbox.Run(ctx, spec)
	}
	if spec.Gateway != nil {
		err := fmt.Errorf("%w: the gateway is the egress layer's to set", sandbox.ErrInvalidSpec)
		return sandbox.Result{Status: sandbox.StatusSandboxError, Message: err.Error()}, err
	}
	spec, err := withCACerts(ctx, s.Sandbox, spec)
	if err != nil {
		return sandbox.Result{Status: sandbox.StatusSandboxError, Message: err.Error()}, err
	}
	p, err := New(Config{Network: *spec.Network, Lookup: s.Lookup})
	if err != nil {
		err = fmt.Errorf("%w: %v", sandbox.ErrInvalidSpec, err)
		return sandbox.Result{Status: sandbox.StatusSandboxError, Message: err.Error()}, err
	}
	spec.Gateway = p
	spec.Env = ProxyEnv(spec.Env, p.Port())
	spec.Files = append(append([]sandbox.File(nil), spec.Files...), sandbox.File{Path: PreloadPath, Data: fetchPreload})
	res, err := s.Sandbox.Run(ctx, spec)
	p.Close() // every process of the sandbox is gone: nothing new can come
	res.Egress = p.Report()
	return res, err
}

// ProxyEnv returns env with the variables that point ordinary clients at
// the proxy: the *_PROXY family in both cases (curl reads only lower-case
// http_proxy), pip's and npm's own settings, and node's preload. The
// sandbox's own loopback stays direct (NO_PROXY).
func ProxyEnv(env map[string]string, port int) map[string]string {
	out := maps.Clone(env)
	if out == nil {
		out = map[string]string{}
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		out[k], out[strings.ToLower(k)] = url, url
	}
	out["NO_PROXY"], out["no_proxy"] = "localhost,127.0.0.1,::1", "localhost,127.0.0.1,::1"
	out["PIP_PROXY"] = url
	out["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
	out["npm_config_proxy"], out["npm_config_https_proxy"] = url, url
	opt := "--require " + PreloadPath
	if o := out["NODE_OPTIONS"]; o != "" {
		opt += " " + o
	}
	out["NODE_OPTIONS"] = opt
	return out
}
