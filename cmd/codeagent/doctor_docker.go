package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/backends"
	"github.com/codeagent/codeagent/sandbox/docker"
	"github.com/codeagent/codeagent/workspace"
)

// dockerDoctor reports what the docker backend finds: the engine and the
// image (opening the backend checks both), then one small program run in
// a container as every execution would be.
func dockerDoctor(ctx context.Context, s stdio, bf *backendFlags, weak bool) int {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	w := s.out
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = "the default socket"
	}
	image := bf.Image
	if image == "" {
		image = docker.DefaultImage
	}
	fmt.Fprintf(w, "docker engine:     %s\n", host)
	fmt.Fprintf(w, "image:             %s\n", image)
	start := time.Now()
	sb, err := openBackend("docker", bf.options(backends.Options{AllowWeakIsolation: weak, Logger: newLogger(s.err)}))
	if err != nil {
		fmt.Fprintf(w, "backend:           FAIL %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return exitFailure
	}
	defer sb.Close()
	fmt.Fprintf(w, "backend:           ok: the engine answers and has the image (%d ms)\n", time.Since(start).Milliseconds())
	tmp, err := workspace.TempDir()
	if err == nil {
		var ws *workspace.Workspace
		if ws, err = workspace.NewTemp(tmp, "codeagent-doctor-"); err == nil {
			defer ws.Close()
			var res sandbox.Result
			start = time.Now()
			res, err = sb.Run(ctx, sandbox.Spec{Command: []string{"python3", "-c", "print('ok')"}, Workspace: ws.Dir})
			if err == nil && (res.Status != sandbox.StatusOK || strings.TrimSpace(string(res.Stdout)) != "ok") {
				err = fmt.Errorf("status %s, exit %d: %s", res.Status, res.ExitCode, strings.TrimSpace(res.Message+" "+string(res.Stderr)))
			}
		}
	}
	if err != nil {
		fmt.Fprintf(w, "a program:         FAIL %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return exitFailure
	}
	fmt.Fprintf(w, "a program:         ok: ran in a container (%d ms)\n", time.Since(start).Milliseconds())
	if tr := sandbox.TrusterOf(sb); tr != nil {
		ts, err := tr.TrustStore(ctx)
		printTrust(w, ts, err)
	}
	return exitOK
}
