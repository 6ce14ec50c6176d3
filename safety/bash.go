package safety

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"

	bash "github.com/tree-sitter/tree-sitter-bash/bindings/go"
)

// Bash node kinds the rules look at.
const (
	shCommand kind = firstLanguageKind + iota
	shCommandName
	shWord
	shString
	shRawString
	shAnsiCString
	shStringContent
	shConcatenation
	shNumber
	shFileRedirect
	shHeredocBody
)

var shKindNames = map[string]kind{
	"command": shCommand, "command_name": shCommandName, "word": shWord, "string": shString,
	"raw_string": shRawString, "ansi_c_string": shAnsiCString, "string_content": shStringContent,
	"concatenation": shConcatenation, "number": shNumber, "file_redirect": shFileRedirect,
	"heredoc_body": shHeredocBody,
}

var shFieldNames = []string{"name", "argument", "destination"}

var shGrammarOnce = sync.OnceValue(func() *grammar {
	return newGrammar(bash.Language(), shKindNames, shFieldNames)
})

func bashGrammar() *grammar { return shGrammarOnce() }

// networkCommands are the forbidden commands reported as network access.
var networkCommands = set{
	"curl": true, "wget": true, "nc": true, "ncat": true, "netcat": true, "socat": true, "ssh": true,
	"scp": true, "sftp": true, "ftp": true, "telnet": true, "rsync": true, "nmap": true, "ping": true,
	"dig": true, "nslookup": true, "host": true,
}

// wrapperCommands run the command given in their arguments.
var wrapperCommands = set{
	"env": true, "command": true, "exec": true, "nohup": true, "timeout": true, "xargs": true,
	"nice": true, "time": true, "stdbuf": true, "busybox": true, "builtin": true, "setsid": true,
	"watch": true, "ionice": true, "chronic": true, "unbuffer": true,
}

// shells run their -c argument as code.
var shells = set{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "ash": true}

// lastArgWriters write only to their last argument.
var lastArgWriters = set{"cp": true, "install": true, "ln": true}

// maxShellNesting bounds how deep sh -c 'sh -c ...' is followed.
const maxShellNesting = 3

type shAnalyser struct {
	pool      *parserPool
	policy    *Policy
	forbidden set
	writers   set
	f         struct{ name, argument, destination uint16 }
}

func newBashAnalyser(p *Policy, pool *parserPool) *shAnalyser {
	a := &shAnalyser{pool: pool, policy: p,
		forbidden: newSet(p.Bash.ForbiddenCommands), writers: newSet(p.Bash.WriteCommands)}
	a.f.name, a.f.argument, a.f.destination = pool.g.field("name"), pool.g.field("argument"), pool.g.field("destination")
	return a
}

type shFile struct {
	*shAnalyser
	ctx   context.Context
	t     *tree
	out   *collector
	depth int
}

func (a *shAnalyser) analyse(ctx context.Context, code []byte, out *collector) error {
	return a.analyseDepth(ctx, code, out, 0)
}

func (a *shAnalyser) analyseDepth(ctx context.Context, code []byte, out *collector, depth int) error {
	t, release, err := a.pool.parse(ctx, code)
	if err != nil {
		return err
	}
	defer release()
	t.reportSyntaxErrors(out, "fix the syntax at this line; the script must run under bash")
	f := &shFile{shAnalyser: a, ctx: ctx, t: t, out: out, depth: depth}
	for i := int32(0); i < int32(len(t.nodes)); i++ {
		if i&0xFFF == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		switch t.kind(i) {
		case shCommand:
			if err := f.checkCommand(i); err != nil {
				return err
			}
		case shFileRedirect:
			f.checkRedirect(i)
		case shWord, shStringContent, shRawString, shAnsiCString, shHeredocBody:
			v := t.text(i)
			if t.kind(i) == shAnsiCString {
				v = decodePyEscapes(v, false)
			}
			if strings.Contains(v, "/dev/tcp/") || strings.Contains(v, "/dev/udp/") {
				f.add(RuleNetworkAccess, i, "bash /dev/tcp and /dev/udp paths open network connections",
					"the sandbox has no network; read the input files in the workspace instead")
			}
		}
	}
	return nil
}

func (f *shFile) add(rule string, i int32, msg, hint string) {
	s, e := f.t.span(i)
	f.out.add(rule, s, e, msg, hint)
}

// value returns the static value of a word-like node and whether it is
// complete (false when an expansion makes part of it unknown).
func (f *shFile) value(i int32, depth int) (string, bool) {
	t := f.t
	if i < 0 || depth > 32 {
		return "", false
	}
	switch t.kind(i) {
	case shWord, shNumber:
		w := t.text(i)
		if strings.HasPrefix(w, "$") {
			return "", false
		}
		return strings.ReplaceAll(w, `\`, ""), true
	case shRawString:
		return strings.Trim(t.text(i), "'"), true
	case shAnsiCString:
		return decodePyEscapes(strings.TrimSuffix(strings.TrimPrefix(t.text(i), "$'"), "'"), false), true
	case shString:
		var b strings.Builder
		for c := t.firstNamed(i); c >= 0; c = t.nextNamed(c) {
			if t.kind(c) != shStringContent {
				return b.String(), false
			}
			b.WriteString(t.text(c))
		}
		return b.String(), true
	case shConcatenation:
		var b strings.Builder
		for c := t.firstNamed(i); c >= 0; c = t.nextNamed(c) {
			v, ok := f.value(c, depth+1)
			b.WriteString(v)
			if !ok {
				return b.String(), false
			}
		}
		return b.String(), true
	}
	return "", false
}

// homePrefix reports a word that starts in the home directory via $HOME.
func (f *shFile) homePrefix(i int32) bool {
	s := strings.TrimLeft(f.t.text(i), `"`)
	return strings.HasPrefix(s, "$HOME") || strings.HasPrefix(s, "${HOME")
}

func (f *shFile) checkCommand(i int32) error {
	t := f.t
	nameNode := t.firstNamed(t.child(i, f.f.name))
	if nameNode < 0 {
		return nil
	}
	var args []int32
	for c := t.node(i).FirstChild; c >= 0; c = t.node(c).NextSibling {
		if t.fieldOf(c) == f.f.argument {
			args = append(args, c)
		}
	}
	at := nameNode
	v, exact := f.value(nameNode, 0)
	for {
		if !exact {
			f.add(RuleDynamicCommand, at, "the command name is computed, so the checker cannot see what runs",
				"write the command name literally")
			return nil
		}
		cmd := path.Base(v)
		if !wrapperCommands[cmd] {
			return f.checkNamed(at, cmd, args)
		}
		// Skip the wrapper's options and settings to find the command it runs.
		k := 0
		for k < len(args) {
			s, _ := f.value(args[k], 0)
			if strings.HasPrefix(s, "-") || strings.Contains(s, "=") || t.kind(args[k]) == shNumber || (cmd == "timeout" && k == 0) {
				k++
				continue
			}
			break
		}
		if k >= len(args) {
			return nil
		}
		at = args[k]
		v, exact = f.value(at, 0)
		args = args[k+1:]
	}
}

// checkNamed applies the command rules to cmd, named at node at.
func (f *shFile) checkNamed(at int32, cmd string, args []int32) error {
	switch {
	case f.forbidden[cmd]:
		switch {
		case networkCommands[cmd]:
			f.add(RuleNetworkAccess, at, cmd+" reaches the network", "the sandbox has no network; read the input files in the workspace instead")
		case cmd == "eval":
			f.add(RuleForbiddenCommand, at, "eval runs a string as shell code", "write the commands directly")
		default:
			f.add(RuleForbiddenCommand, at, cmd+" is not allowed", "run the commands directly, without changing user or root")
		}
	case shells[cmd]:
		return f.checkShellC(at, cmd, args)
	case f.writers[cmd]:
		f.checkWrites(cmd, args)
	}
	return nil
}

// checkShellC follows sh -c 'CODE' into CODE.
func (f *shFile) checkShellC(at int32, cmd string, args []int32) error {
	for k, a := range args {
		s, _ := f.value(a, 0)
		if !strings.HasPrefix(s, "-") || !strings.Contains(s, "c") || strings.HasPrefix(s, "--") {
			continue
		}
		if k+1 >= len(args) {
			return nil
		}
		code, exact := f.value(args[k+1], 0)
		if !exact {
			f.add(RuleDynamicCommand, args[k+1], cmd+" -c runs a computed string", "write the commands directly instead of passing them to "+cmd+" -c")
			return nil
		}
		if f.depth >= maxShellNesting {
			f.add(RuleNestedShellTooDeep, args[k+1], "shell code nested too deep to check", "write the commands directly instead of nesting sh -c")
			return nil
		}
		inner := newCollector([]byte(code), f.policy)
		if err := f.analyseDepth(f.ctx, []byte(code), inner, f.depth+1); err != nil {
			return err
		}
		for _, fi := range inner.result() {
			if fi.Rule == RuleFindingLimit {
				continue
			}
			f.add(fi.Rule, args[k+1], fmt.Sprintf("in %s -c: %s", cmd, fi.Message), fi.Hint)
		}
		return nil
	}
	return nil
}

// checkWrites reports path arguments of writing commands that leave the workspace.
func (f *shFile) checkWrites(cmd string, args []int32) {
	var targets []int32
	for _, a := range args {
		s, _ := f.value(a, 0)
		if strings.HasPrefix(s, "-") && cmd != "dd" {
			continue
		}
		targets = append(targets, a)
	}
	if lastArgWriters[cmd] && len(targets) > 0 {
		targets = targets[len(targets)-1:]
	}
	for _, a := range targets {
		s, exact := f.value(a, 0)
		if cmd == "dd" {
			rest, ok := strings.CutPrefix(s, "of=")
			if !ok {
				continue
			}
			s = rest
		}
		f.checkPath(a, cmd, s, exact)
	}
}

func (f *shFile) checkPath(at int32, what, p string, exact bool) {
	why := pathOutside(p, exact, f.policy.Files.AllowedAbsolute)
	if why == "" && f.homePrefix(at) {
		why = "it names the home directory"
	}
	if why != "" {
		f.add(RulePathOutside, at, fmt.Sprintf("%s writes to %q, outside the workspace: %s", what, p, why), pathHint)
	}
}

// checkRedirect reports output redirections to paths outside the workspace.
func (f *shFile) checkRedirect(i int32) {
	t := f.t
	writes := false
	for c := t.node(i).FirstChild; c >= 0; c = t.node(c).NextSibling {
		if !t.named(c) && strings.Contains(t.text(c), ">") {
			writes = true
		}
	}
	if !writes {
		return
	}
	dest := t.child(i, f.f.destination)
	if dest < 0 || t.kind(dest) == shNumber {
		return
	}
	p, exact := f.value(dest, 0)
	if exact && (p == "-" || strings.Trim(p, "0123456789") == "") {
		return // >&2, >&-
	}
	f.checkPath(dest, "the redirection", p, exact)
}
