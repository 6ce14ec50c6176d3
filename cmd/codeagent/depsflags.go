package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/codeagent/codeagent/deps"
)

// depsFlags are the flags that declare a program's Python or JavaScript
// dependencies, the same on exec and run.
type depsFlags struct {
	Requirements string
	Packages     repeated
	IndexURL     string
	FindLinks    string
	AllowSource  bool
	JSPackages   repeated
	NPMRegistry  string
}

func (d *depsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.Requirements, "requirements", "", "first install the packages of this pip requirements file, in a sandbox of their own; cached")
	fs.Var(&d.Packages, "require", "install this Python package first, e.g. seaborn==0.13.2 (repeatable)")
	fs.StringVar(&d.IndexURL, "index-url", "", "the package index (PEP 503 simple API) to install from (default "+deps.DefaultIndexURL+")")
	fs.StringVar(&d.FindLinks, "find-links", "", "install from this directory of wheels instead, with no network at all")
	fs.BoolVar(&d.AllowSource, "allow-source-builds", false, "let sdists build and npm install scripts run, in the install's sandbox (default: neither)")
	fs.Var(&d.JSPackages, "require-js", "install this npm package first, e.g. lodash@4.17.21 (repeatable; JavaScript programs)")
	fs.StringVar(&d.NPMRegistry, "npm-registry", "", "the npm registry to install from (default "+deps.DefaultNPMRegistry+")")
}

// declared says the flags name packages.
func (d depsFlags) declared() bool {
	return d.Requirements != "" || len(d.Packages) > 0 || len(d.JSPackages) > 0
}

// request is what the flags ask for, or found (what a run's folder or
// manifest declares) when they name no packages; an unreadable or
// malformed requirements file is a usage error, and so is an index
// without requirements unless indexAlone (programs may declare them), or
// a registry without npm packages.
func (d depsFlags) request(indexAlone bool, found deps.Request) (deps.Request, error) {
	r := deps.Request{IndexURL: d.IndexURL, FindLinks: d.FindLinks, AllowSource: d.AllowSource, NPMRegistry: d.NPMRegistry,
		Python: append([]string(nil), d.Packages...), JavaScript: append([]string(nil), d.JSPackages...)}
	if !d.declared() {
		r.Python, r.JavaScript = found.Python, found.JavaScript
	}
	if d.Requirements != "" {
		f, err := os.Open(d.Requirements)
		if err != nil {
			return r, usagef("--requirements: %w", err)
		}
		defer f.Close()
		reqs, err := deps.ParseRequirements(f)
		if err != nil {
			return r, usagef("--requirements %s: %w", d.Requirements, err)
		}
		r.Python = append(r.Python, reqs...)
	}
	if len(r.Python) == 0 && !indexAlone && (d.IndexURL != "" || d.FindLinks != "") {
		return r, usagef("--index-url and --find-links need requirements (--requirements or --require)")
	}
	if r.Empty() && !indexAlone && d.AllowSource {
		return r, usagef("--allow-source-builds needs packages (--requirements, --require or --require-js)")
	}
	if len(r.JavaScript) == 0 && d.NPMRegistry != "" {
		return r, usagef("--npm-registry needs npm packages (--require-js)")
	}
	if !r.Empty() {
		if _, err := r.Normalize(); err != nil {
			return r, usageError{err}
		}
	}
	return r, nil
}

// checkLanguage refuses packages of another language than lang's
// programs: a usage error naming the flags.
func checkLanguage(r deps.Request, lang string) error {
	if len(r.Python) > 0 && lang != "python" {
		return usagef("--requirements and --require are for Python programs; this one is %s", lang)
	}
	if len(r.JavaScript) > 0 && lang != "javascript" {
		return usagef("--require-js is for JavaScript programs; this one is %s", lang)
	}
	return nil
}

// installNotice tells w that an install starts.
func installNotice(w io.Writer) func(deps.Request) {
	return func(r deps.Request) {
		var what, from []string
		if len(r.Python) > 0 {
			what, from = append(what, r.Python...), append(from, r.IndexURL)
			if r.FindLinks != "" {
				from[0] = r.FindLinks
			}
		}
		if len(r.JavaScript) > 0 {
			what, from = append(what, r.JavaScript...), append(from, r.NPMRegistry)
		}
		fmt.Fprintf(w, "codeagent: installing %s from %s (once; cached afterwards)\n", strings.Join(what, " "), strings.Join(from, " and "))
	}
}
