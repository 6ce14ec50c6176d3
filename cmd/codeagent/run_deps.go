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
// else the requirements.txt or package.json of the folder or --workdir
// the run works in (one that codeagent cannot install is named on stderr
// and left out), installed now; and what the manifest's
// permissions.install lets a program declare itself. Packages found for
// another language than the run's are left out. Nil when there is
// neither. Installs trust the authorities of trust too (--ca-cert).
func runInstaller(ctx context.Context, o runOptions, m *manifest.Manifest, s stdio, sb sandbox.Sandbox, backend, dataDir string, trust []byte) (*app.Installer, error) {
	var found, mreq deps.Request
	var allow []string
	if m != nil {
		mreq, allow = m.DependencyRequest(), m.Agent.Permissions.Install
	}
	switch {
	case o.Deps.declared():
	case !mreq.Empty():
		found = mreq
	default:
		found = deps.Request{Python: folderRequirements(o, s), JavaScript: folderPackageJSON(o, s)}
	}
	if o.Lang != "python" {
		found.Python = nil
	}
	if o.Lang != "javascript" {
		found.JavaScript = nil
	}
	req, err := o.Deps.request(len(allow) > 0, found)
	if err != nil {
		return nil, err
	}
	if req.IndexURL == "" && req.FindLinks == "" {
		req.IndexURL, req.FindLinks = mreq.IndexURL, mreq.FindLinks
	}
	if req.NPMRegistry == "" {
		req.NPMRegistry = mreq.NPMRegistry
	}
	req.CACerts = trust
	if err := checkLanguage(req, o.Lang); err != nil {
		return nil, err
	}
	if req.Empty() && ((len(allow) == 0 && o.Approval.Approve == "") || o.Lang != "python") {
		return nil, nil // permissions.install (or a person's approval) is for Python programs
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

// folderFile reads the file name of the directory the run works in, not
// following a link; nil when there is none (or it is not a regular file
// of at most 1 MiB).
func folderFile(o runOptions, name string) []byte {
	dir := o.Folder
	if dir == "" {
		dir = o.Workdir
	}
	if dir == "" || o.Session != "" {
		return nil
	}
	fd, err := unix.Open(filepath.Join(dir, name), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > 1<<20 {
		return nil
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(f); err != nil {
		return nil
	}
	return b.Bytes()
}

// folderRequirements reads the requirements.txt of the directory the run
// works in.
func folderRequirements(o runOptions, s stdio) []string {
	if o.Lang != "python" {
		return nil
	}
	b := folderFile(o, "requirements.txt")
	if b == nil {
		return nil
	}
	reqs, err := deps.ParseRequirements(bytes.NewReader(b))
	if errors.Is(err, deps.ErrInvalid) {
		printErr(s.err, "requirements.txt: %v: not installed (see --requirements)", err)
		return nil
	}
	return reqs
}

// folderPackageJSON reads the "dependencies" of the package.json of the
// directory the run works in.
func folderPackageJSON(o runOptions, s stdio) []string {
	if o.Lang != "javascript" {
		return nil
	}
	b := folderFile(o, "package.json")
	if b == nil {
		return nil
	}
	specs, err := deps.ParsePackageJSON(bytes.NewReader(b))
	if err != nil {
		printErr(s.err, "package.json: %v: not installed (see --require-js)", err)
		return nil
	}
	return specs
}
