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
	"github.com/codeagent/codeagent/sandbox"
)

// runDependencies returns the environment a run's programs get: what the
// flags declare, or else the requirements.txt of the folder or --workdir
// the run works in (one that codeagent cannot install is named on stderr
// and left out). Nil when there is none; installed first when need be.
func runDependencies(ctx context.Context, o runOptions, s stdio, sb sandbox.Sandbox, backend, dataDir string) (*deps.Lease, error) {
	var found []string
	if o.Deps.Requirements == "" && len(o.Deps.Packages) == 0 {
		found = folderRequirements(o, s)
	}
	req, err := o.Deps.request(found...)
	if err != nil || req.Empty() {
		return nil, err
	}
	if o.Lang != "python" {
		return nil, usagef("--requirements and --require are for Python programs; this run is in %s", o.Lang)
	}
	envs := app.Envs(dataDir, sb, backend, newLogger(s.err))
	if !o.JSON {
		envs.OnInstall = installNotice(s.err)
	}
	return envs.Ensure(ctx, req)
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
