package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// cellsJSON is the answer of GET /v1/sessions/{id}/cells.
type cellsJSON struct {
	Cells []struct {
		N              int64  `json:"n"`
		Code           string `json:"code"`
		Stdout         string `json:"stdout"`
		Stderr         string `json:"stderr"`
		Status         string `json:"status"`
		ErrorName      string `json:"error_name"`
		ExecutionCount int    `json:"execution_count"`
		WallMS         int64  `json:"wall_ms"`
		StartedAt      string `json:"started_at"`
		Images         []string
		Display        []struct {
			Kind string
			Data map[string]string
			File string
		}
	}
	More bool
}

// TestSessionCellsKept runs cells in a session's kernel through the API
// and lists them again from the store: code, output (secrets redacted),
// figures by name and not as bytes, errors; pages; another key sees none
// of them, and the route needs a key.
func TestSessionCellsKept(t *testing.T) {
	ts := newTestServer(t, testOptions{cfg: Config{Keys: twoKeys}, noModel: true, warmPython: 2})
	s := ts.createSession(t, aliceToken, "kept")
	path := "/v1/sessions/" + s.ID + "/cells"
	var empty cellsJSON
	ts.json(t, "GET", path, aliceToken, nil, http.StatusOK, &empty)
	if len(empty.Cells) != 0 || empty.More {
		t.Fatalf("before any cell: %+v", empty)
	}
	// The last lines look like a private key block around a line that
	// runs: code is kept as it ran, but for the secrets the server knows
	// (bob's token); the output is redacted of the key patterns too.
	plot := "import matplotlib.pyplot as plt\nprint('drawn', 6 * 7)\nplt.plot([1, 3, 2])\n# -----BEGIN PRIVATE KEY-----\nhidden = 'ran'\n" +
		"'" + bobToken + " sk-ant-api03-abcdefghijklmnop'"
	if r := ts.cell(t, aliceToken, s.ID, plot, 200); r.Status != "ok" || len(r.Images) != 1 {
		t.Fatalf("plot: %+v", r)
	}
	if r := ts.cell(t, aliceToken, s.ID, "1 / 0", 200); r.Status != "error" {
		t.Fatalf("1 / 0: %+v", r)
	}
	ts.cell(t, aliceToken, s.ID, "print('third')", 200)

	var got cellsJSON
	ts.json(t, "GET", path, aliceToken, nil, http.StatusOK, &got)
	if len(got.Cells) != 3 || got.More {
		t.Fatalf("cells: %+v", got)
	}
	c := got.Cells[0]
	if c.N != 1 || c.ExecutionCount != 1 || c.Stdout != "drawn 42\n" || c.Status != "ok" || c.StartedAt == "" ||
		len(c.Images) != 1 || !strings.HasPrefix(c.Images[0], "figure-") {
		t.Fatalf("the plot's cell: %+v", c)
	}
	if !strings.Contains(c.Code, "plt.plot([1, 3, 2])") || strings.Contains(c.Code, bobToken) || !strings.Contains(c.Code, "hidden = 'ran'") ||
		!strings.Contains(c.Code, "[REDACTED] sk-ant-api03-abcdefghijklmnop") {
		t.Errorf("the code is not kept as it ran but for the server's secrets: %q", c.Code)
	}
	var figure, result bool
	for _, d := range c.Display {
		if d.Kind == "figure" && d.File == c.Images[0] {
			figure = true
			if _, ok := d.Data["image/png"]; ok {
				t.Errorf("the figure's bytes are kept in the store")
			}
		}
		if d.Kind == "result" {
			result = true
			if v := d.Data["text/plain"]; strings.Contains(v, bobToken) || strings.Contains(v, "sk-ant-api03") || !strings.Contains(v, "[REDACTED]") {
				t.Errorf("the result kept with its secrets: %q", v)
			}
		}
	}
	if !figure || !result {
		t.Errorf("displays: %+v", c.Display)
	}
	if e := got.Cells[1]; e.Code != "1 / 0" || e.Status != "error" || e.ErrorName != "ZeroDivisionError" || !strings.Contains(e.Stderr, "ZeroDivisionError") {
		t.Errorf("the failed cell: %+v", e)
	}
	if b, _ := json.Marshal(got); strings.Contains(string(b), bobToken) {
		t.Errorf("a key in the answer: %s", b)
	}

	var page cellsJSON
	ts.json(t, "GET", path+"?limit=2", aliceToken, nil, http.StatusOK, &page)
	if len(page.Cells) != 2 || !page.More || page.Cells[0].N != 2 || page.Cells[1].Code != "print('third')" {
		t.Fatalf("the newest 2: %+v", page)
	}
	ts.json(t, "GET", path+"?limit=2&before=2", aliceToken, nil, http.StatusOK, &page)
	if len(page.Cells) != 1 || page.More || page.Cells[0].N != 1 {
		t.Fatalf("before 2: %+v", page)
	}
	ts.json(t, "GET", path+"?after=2", aliceToken, nil, http.StatusOK, &page)
	if len(page.Cells) != 1 || page.Cells[0].N != 3 {
		t.Fatalf("after 2: %+v", page)
	}
	for _, q := range []string{"?limit=201", "?limit=0", "?limit=x", "?after=-1", "?before=1e3"} {
		ts.json(t, "GET", path+q, aliceToken, nil, http.StatusBadRequest, nil)
	}

	// Another key's session is not found; a key is needed.
	ts.json(t, "GET", path, bobToken, nil, http.StatusNotFound, nil)
	ts.json(t, "GET", path, "", nil, http.StatusUnauthorized, nil)
	bob := ts.createSession(t, bobToken, "kept")
	ts.cell(t, bobToken, bob.ID, "print('bob')", 200)
	var bobs cellsJSON
	ts.json(t, "GET", "/v1/sessions/"+bob.ID+"/cells", bobToken, nil, http.StatusOK, &bobs)
	if len(bobs.Cells) != 1 || bobs.Cells[0].Stdout != "bob\n" {
		t.Fatalf("bob's cells: %+v", bobs)
	}

	// A fresh program in the session is not a kernel cell; deleting the
	// session removes its cells.
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/exec", aliceToken, map[string]any{"language": "python", "code": "print(1)"}, 200, nil)
	ts.json(t, "GET", path, aliceToken, nil, http.StatusOK, &got)
	if len(got.Cells) != 3 {
		t.Fatalf("after a fresh program: %d cells", len(got.Cells))
	}
	ts.json(t, "DELETE", "/v1/sessions/"+s.ID, aliceToken, nil, http.StatusNoContent, nil)
	ts.json(t, "GET", path, aliceToken, nil, http.StatusNotFound, nil)
	if n, _, err := ts.st.Cells(t.Context(), s.ID, 0, 0, 10); err != nil || len(n) != 0 {
		t.Fatalf("cells left in the store: %d (%v)", len(n), err)
	}
}
