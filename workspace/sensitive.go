package workspace

import (
	"strings"
)

// What a run may change in a folder is decided by name, at any depth, and
// decided again by Apply whatever the change list says: a program must not
// plant a file that a host tool executes or loads merely because it is
// there (git's metadata and hooks, npm's script-shell, direnv's .envrc, an
// editor's tasks), nor replace one that holds secrets. docs/RUN.md lists
// the rules; this file is their one definition.

// NeverApplied is the reason of a change below git's metadata: a nested
// repository's .git/config (core.fsmonitor), its hooks, or a submodule's
// .git file would run the program's commands at the user's next git
// command. No flag applies it.
const NeverApplied = "git's own files (.git, at any depth): never applied, a change there runs commands at the next git command"

// inertDotNames are the dot names no common tool executes or loads to
// configure itself: the only dot names a change may have without being
// named with --apply-sensitive.
var inertDotNames = map[string]bool{
	".gitignore": true, ".gitkeep": true, ".keep": true, ".dockerignore": true, ".npmignore": true,
	".prettierignore": true, ".eslintignore": true, ".editorconfig": true, ".env.example": true, ".env.sample": true,
}

// hostToolNames are names without a leading dot that a tool reads by
// itself where it finds them, with what it does with them.
var hostToolNames = map[string]string{
	"mise.toml":           "mise runs its hooks and tasks on entering the folder",
	"mise.local.toml":     "mise runs its hooks and tasks on entering the folder",
	"rust-toolchain":      "rustup runs the toolchain it names",
	"rust-toolchain.toml": "rustup runs the toolchain it names",
	"sitecustomize.py":    "Python imports it at every start where the folder is on the path",
	"usercustomize.py":    "Python imports it at every start where the folder is on the path",
	"pyvenv.cfg":          "it makes a directory a Python environment whose programs run",
}

// knownDotNames give the reason for the common dot names (any other dot
// name gets the general one).
var knownDotNames = map[string]string{
	".npmrc":                  "npm reads it by itself (script-shell, registries, tokens)",
	".yarnrc":                 "yarn reads it by itself",
	".yarnrc.yml":             "yarn reads it by itself (yarnPath runs a file)",
	".pnpmfile.cjs":           "pnpm runs it at every install",
	".envrc":                  "direnv runs it on entering the folder",
	".pre-commit-config.yaml": "pre-commit runs its hooks at the next commit",
	".gitattributes":          "git runs the filters and drivers it names",
	".gitmodules":             "git reads submodules' URLs and paths from it",
	".lfsconfig":              "git-lfs reads it by itself",
	".vscode":                 "VS Code runs its tasks and settings' commands",
	".idea":                   "JetBrains IDEs run its run configurations and startup tasks",
	".devcontainer":           "a dev container runs its commands on the host",
	".husky":                  "husky's hooks run at the next git command",
	".github":                 "its workflows run in CI with the repository's secrets",
	".venv":                   "its programs run as the project's Python",
}

// Sensitive says why a change at the slash-separated path rel is applied
// only when the person names it (--apply-sensitive), or, with never, not at
// all; "" when rel may be changed. It looks at every component, so a name
// is caught at any depth, in any case.
func Sensitive(rel string) (reason string, never bool) {
	parts := strings.Split(rel, "/")
	for _, p := range parts {
		if isGitName(p) {
			return NeverApplied, true
		}
	}
	for i, p := range parts {
		dir := i < len(parts)-1
		name := strings.ToLower(p)
		if why, ok := knownDotNames[name]; ok {
			return why, false
		}
		if heldBack(name, dir) {
			return "a name that commonly holds secrets", false
		}
		if why, ok := hostToolNames[name]; ok && !dir {
			return why, false
		}
		if strings.HasPrefix(name, ".") && !(inertDotNames[name] && !dir) {
			return "a dot file or directory: where host tools (shells, editors, package managers, git, CI) find configuration they load by themselves", false
		}
	}
	return "", false
}

// isGitName reports whether a path component names git's metadata as git
// itself would take it: .git in any case, with trailing dots or spaces
// (which some file systems drop), or its 8.3 short name GIT~1.
func isGitName(part string) bool {
	p := strings.ToLower(strings.TrimRight(part, ". "))
	if p == ".git" {
		return true
	}
	rest, ok := strings.CutPrefix(p, "git~")
	return ok && rest != "" && strings.Trim(rest, "0123456789") == ""
}

// allowedBy reports whether the person named rel, or a directory holding it,
// with --apply-sensitive.
func allowedBy(named []string, rel string) bool {
	for _, n := range named {
		n = strings.TrimSuffix(n, "/")
		if n == rel || strings.HasPrefix(rel, n+"/") {
			return true
		}
	}
	return false
}
