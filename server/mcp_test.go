package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func connectMCP(ctx context.Context, url, token string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token}}}, nil)
}

// TestServeMCP runs code through MCP at /mcp of the real server, behind its
// API keys.
func TestServeMCP(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{Keys: twoKeys}, noModel: true, mcp: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := connectMCP(ctx, ts.URL, ""); err == nil {
		t.Fatal("an MCP client without a key was admitted")
	}
	sess, err := connectMCP(ctx, ts.URL, aliceToken)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	tools, err := sess.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "execute_code") {
		t.Fatalf("tools %v", names)
	}
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code",
		Arguments: map[string]any{"language": "python", "code": "print(6 * 7)"}})
	if err != nil || res.IsError {
		t.Fatalf("execute_code: %v %+v", err, res)
	}
	out, _ := res.StructuredContent.(map[string]any)
	if out["status"] != "ok" || out["stdout"] != "42\n" {
		t.Fatalf("result %v", res.StructuredContent)
	}
}
