package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/codeagent/codeagent/deps"
)

// depsFlags are the flags that declare a program's Python dependencies,
// the same on exec and run.
type depsFlags struct {
	Requirements string
	Packages     repeated
	IndexURL     string
	FindLinks    string
	AllowSource  bool
}

func (d *depsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.Requirements, "requirements", "", "install the Python packages of this requirements file (pip's format) first, in a sandbox of their own; cached")
	fs.Var(&d.Packages, "require", "install this Python package first, e.g. seaborn==0.13.2 (repeatable)")
	fs.StringVar(&d.IndexURL, "index-url", "", "the package index (PEP 503 simple API) to install from (default "+deps.DefaultIndexURL+")")
	fs.StringVar(&d.FindLinks, "find-links", "", "install from this directory of wheels instead, with no network at all")
	fs.BoolVar(&d.AllowSource, "allow-source-builds", false, "let source distributions build (inside the install's sandbox); wheels only otherwise")
}

// request is what the flags ask for, with found (the requirements of a
// run's folder or manifest) when they name none; an unreadable or
// malformed requirements file is a usage error, and so is an index
// without requirements unless indexAlone (programs may declare them).
func (d depsFlags) request(indexAlone bool, found ...string) (deps.Request, error) {
	r := deps.Request{IndexURL: d.IndexURL, FindLinks: d.FindLinks, AllowSource: d.AllowSource, Python: append([]string(nil), d.Packages...)}
	if d.Requirements == "" && len(d.Packages) == 0 {
		r.Python = found
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
	if r.Empty() && !indexAlone && (d.IndexURL != "" || d.FindLinks != "" || d.AllowSource) {
		return r, usagef("--index-url, --find-links and --allow-source-builds need requirements (--requirements or --require)")
	}
	if !r.Empty() {
		if _, err := r.Normalize(); err != nil {
			return r, usageError{err}
		}
	}
	return r, nil
}

// installNotice tells w that an install starts.
func installNotice(w io.Writer) func(deps.Request) {
	return func(r deps.Request) {
		from := r.IndexURL
		if r.FindLinks != "" {
			from = r.FindLinks
		}
		fmt.Fprintf(w, "codeagent: installing %s from %s (once; cached afterwards)\n", strings.Join(r.Python, " "), from)
	}
}
