package main

import (
	"cmp"
	"context"
	"fmt"
	"runtime/debug"
	"strings"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); empty,
// it comes from the build information (see buildVersion).
var version = ""

func cmdVersion(_ context.Context, s stdio, args []string) int {
	fs := newFlagSet("version", s)
	if code, done := parseNoArgs(fs, args, s); done {
		return code
	}
	fmt.Fprintf(s.out, "codeagent %s\n", buildVersion())
	return exitOK
}

// buildVersion is the version the binary was built as (describeBuild of
// its build information).
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	return describeBuild(version, info, ok)
}

// describeBuild says what a binary was built from: the link-time version
// link, else the module's version (a release's tag, or the pseudo-version
// Go makes from a clone's commit), then, when the build recorded them,
// the VCS revision, its time and whether the tree had uncommitted changes
// (vcs.revision, vcs.time, vcs.modified), and the Go version. A build that
// recorded neither a version nor a revision (a git worktree's, or with
// -buildvcs=false) says so rather than "(devel)" alone.
func describeBuild(link string, info *debug.BuildInfo, ok bool) string {
	v := link
	if !ok {
		return cmp.Or(v, "(unknown)") + ", no build information"
	}
	v = cmp.Or(v, info.Main.Version, "(devel)")
	var rev, at string
	modified := false
	for _, kv := range info.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.time":
			at = kv.Value
		case "vcs.modified":
			modified = kv.Value == "true"
		}
	}
	parts := []string{v}
	switch {
	case rev != "":
		parts = append(parts, "revision "+rev[:min(12, len(rev))])
		if at != "" {
			parts = append(parts, at)
		}
		if modified {
			parts = append(parts, "modified")
		}
	case v == "(devel)":
		parts = append(parts, "no revision recorded (built outside a git clone, or with -buildvcs=false)")
	}
	if info.GoVersion != "" {
		parts = append(parts, info.GoVersion)
	}
	return strings.Join(parts, ", ")
}
