package main

import "github.com/codeagent/codeagent/workspace"

// checkWorkdir refuses, as a usage error and before a model is asked or a
// sandbox started, a directory given with --NAME that programs' files would
// go to (--workdir, --out) when it must not receive them: /, a system
// directory such as /etc, a directory that holds others such as /home, a
// home directory itself, or a path through a link a program could have
// made. Nothing is created. An empty dir (the flag not given) passes.
func checkWorkdir(name, dir string) error {
	if dir == "" {
		return nil
	}
	if err := workspace.CheckWorkdir(dir); err != nil {
		return usagef("--%s %s: %w", name, dir, err)
	}
	return nil
}
