package main

import (
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

// buildVersion is the version the binary was built as: the link-time
// version, else the module's version, followed by the VCS revision, its
// time and whether the tree had uncommitted changes, when the build
// recorded them ("(devel)" is a build from a checkout).
func buildVersion() string {
	v := version
	info, ok := debug.ReadBuildInfo()
	if !ok {
		if v == "" {
			v = "(unknown)"
		}
		return v
	}
	if v == "" {
		v = info.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	var rev, at, modified string
	for _, kv := range info.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.time":
			at = kv.Value
		case "vcs.modified":
			if kv.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev == "" || strings.Contains(v, rev[:min(12, len(rev))]) {
		return v
	}
	return fmt.Sprintf("%s (revision %s, %s%s)", v, rev[:min(12, len(rev))], at, modified)
}
