package server

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/llm/llmtest"
)

// setuidAttack tries to leave setuid and setgid files, in the plain pathlib
// the static checker lets through (it is a filter; the sandbox must hold).
const setuidAttack = `from pathlib import Path
p = Path('sh')
p.write_bytes(b'#!/bin/sh\nid\n')
for mode in (0o4755, 0o2755, 0o6755):
    try:
        p.chmod(mode)
        print('chmod', oct(mode), 'allowed')
    except OSError as e:
        print('chmod', oct(mode), 'refused')
try:
    Path('sgid').mkdir(mode=0o2777)
    print('mkdir allowed')
except OSError as e:
    print('mkdir refused')
`

// TestServeSetuidAttacks runs the attack through /v1/exec and through a
// session's run, and checks the session's workspace on the host.
func TestServeSetuidAttacks(t *testing.T) {
	ts := newTestServer(t, testOptions{replies: []llmtest.Reply{pyReply(setuidAttack), llmtest.Say(verifyOK)}})
	var res struct{ Status, Stdout string }
	ts.json(t, "POST", "/v1/exec", "", map[string]any{"language": "python", "code": setuidAttack}, http.StatusOK, &res)
	if strings.Contains(res.Stdout, "allowed") || strings.Count(res.Stdout, "refused") != 4 {
		t.Errorf("/v1/exec: setuid attempts not all refused:\n%s", res.Stdout)
	}

	s := ts.createSession(t, "", "setuid")
	var run runJSON
	ts.json(t, "POST", "/v1/sessions/"+s.ID+"/runs", "", map[string]any{"task": "leave a setuid shell"}, http.StatusAccepted, &run)
	ts.waitRun(t, "", run.ID)
	found := 0
	err := filepath.WalkDir(ts.data, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if d.Name() == "sh" || d.Name() == "sgid" {
			found++
		}
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("%s is %v on the host", p, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("the run left no file to check: the attack did not run")
	}
}
