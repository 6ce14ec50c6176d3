package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/deps"
	"github.com/codeagent/codeagent/manifest"
	"github.com/codeagent/codeagent/sandbox"
)

// runInstaller returns what gives a run's programs their dependencies:
// what the flags declare, or else the manifest's agent.dependencies, or
// else the requirements.txt of the folder or --workdir the run works in
// (one that codeagent cannot install is named on stderr and left out),
// installed now; and what the manifest's permissions.install lets a
// program declare itself. Nil when there is neither.
func runInstaller(ctx context.Context, o runOptions, m *manifest.Manifest, s stdio, sb sandbox.Sandbox, backend, dataDir string) (*app.Installer, error) {
	var found []string
	var allow []string
	fromFlags := o.Deps.Requirements != "" || len(o.Deps.Packages) > 0
	var mreq deps.Request
	if m != nil {
		mreq, allow = m.DependencyRequest(), m.Agent.Permissions.Install
	}
	switch {
	case fromFlags:
	case !mreq.Empty():
		found = mreq.Python
	default:
		found = folderRequirements(o, s)
	}
	req, err := o.Deps.request(len(allow) > 0, found...)
	if err != nil {
		return nil, err
	}
	if req.IndexURL == "" && req.FindLinks == "" {
		req.IndexURL, req.FindLinks = mreq.IndexURL, mreq.FindLinks
	}
	if req.Empty() && len(allow) == 0 {
		return nil, nil
	}
	if o.Lang != "python" {
		if req.Empty() {
			return nil, nil // permissions.install is for Python programs
		}
		return nil, usagef("--requirements and --require are for Python programs; this run is in %s", o.Lang)
	}
	envs := app.Envs(dataDir, sb, backend, newLogger(s.err))
	if !o.JSON {
		envs.OnInstall = installNotice(s.err)
	}
	in := app.NewInstaller(envs, req, allow)
	if err := in.Start(ctx); err != nil {
		return nil, err
	}
	return in, nil
}

// folderRequirements reads requirements.txt of the directory the run
// works in, not following a link.
func folderRequirements(o runOptions, s stdio) []string {
	dir := o.Folder
	if dir == "" {
		dir = o.Workdir
	}
	if dir == "" || o.Session != "" {
		return nil
	}
	fd, err := unix.Open(filepath.Join(dir, "requirements.txt"), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), "requirements.txt")
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > 1<<20 {
		return nil
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(f); err != nil {
		return nil
	}
	reqs, err := deps.ParseRequirements(&b)
	if errors.Is(err, deps.ErrInvalid) {
		printErr(s.err, "requirements.txt: %v: not installed (see --requirements)", err)
		return nil
	}
	return reqs
}
