package server

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codeagent/codeagent/internal/pyindex"
	"github.com/codeagent/codeagent/internal/testca"
	"github.com/codeagent/codeagent/sandbox"
)

// POST /v1/exec installs from an index over HTTPS whose authority the
// operator gave (serve --ca-cert, Config.EgressCACerts); a server without
// it answers 400 index_unreachable naming the TLS failure, and 400 too
// for an index where nothing listens, within seconds. A client has no way
// to add an authority: the request's field is refused.
func TestExecDependenciesOverHTTPS(t *testing.T) {
	ca := testca.New(t, "codeagent server test CA")
	fn, data, err := pyindex.Wheel("tern", "1.0", map[string]string{"tern/__init__.py": "VALUE = 42\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ix := pyindex.NewTLS(t, ca.Certificate(t, "127.0.0.1"), pyindex.Dist{Project: "tern", Filename: fn, Data: data})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	body := func(index string) string {
		return fmt.Sprintf(`{"language": "python", "code": "import tern\nprint(tern.VALUE)\n", "dependencies": {"python": ["tern==1.0"], "index_url": %q}}`, index)
	}
	ceiling := []string{ix.Host(), closed}

	plain := newTestServer(t, testOptions{noModel: true, cfg: Config{EgressCeiling: ceiling}})
	resp, b := plain.do(t, "POST", "/v1/exec", "", strings.NewReader(body(ix.URL())), "Content-Type", "application/json")
	if resp.StatusCode != 400 || !strings.Contains(string(b), `"index_unreachable"`) ||
		!strings.Contains(string(b), "the index "+ix.URL()+" could not be reached: TLS failure: certificate verify failed") {
		t.Errorf("without the operator's authority: %d %s", resp.StatusCode, b)
	}
	start := time.Now()
	resp, b = plain.do(t, "POST", "/v1/exec", "", strings.NewReader(body("https://"+closed+"/simple/")), "Content-Type", "application/json")
	if resp.StatusCode != 400 || !strings.Contains(string(b), "could not be reached: connection refused") || time.Since(start) > 10*time.Second {
		t.Errorf("nothing listening: %d after %v: %s", resp.StatusCode, time.Since(start), b)
	}
	resp, b = plain.do(t, "POST", "/v1/exec", "", strings.NewReader(strings.Replace(body(ix.URL()), `"index_url"`, `"ca_certs": "x", "index_url"`, 1)),
		"Content-Type", "application/json")
	if resp.StatusCode != 400 {
		t.Errorf("a client's authority: %d %s", resp.StatusCode, b)
	}

	trusting := newTestServer(t, testOptions{noModel: true, cfg: Config{EgressCeiling: ceiling, EgressCACerts: ca.PEM}})
	var res sandbox.ResultJSON
	trusting.json(t, "POST", "/v1/exec", "", json.RawMessage(body(ix.URL())), http.StatusOK, &res)
	if strings.TrimSpace(res.Stdout) != "42" {
		t.Errorf("with the operator's authority: %+v", res)
	}
}
