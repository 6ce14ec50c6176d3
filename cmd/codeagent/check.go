package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/termtext"
)

// checkOptions are the inputs of codeagent check.
type checkOptions struct {
	JSON       bool
	PolicyFile string    // "" for the built-in policy
	Lang       string    // "" to detect from each file's extension
	Files      []string  // "-" reads standard input (needs Lang)
	Stdin      io.Reader // read for "-"
	MaxSize    int64     // the checker's input limit; 0 for the policy's
}

// checkResult is the JSON output of codeagent check.
type checkResult struct {
	Files []checkFile `json:"files"`
}

// checkFile is one file's result.
type checkFile struct {
	File     string           `json:"file"`
	Safe     bool             `json:"safe"`
	Findings []safety.Finding `json:"findings"`
	Lint     []safety.Finding `json:"lint,omitempty"` // warnings, kind "lint": never make a file unsafe
}

// Safe reports whether every file is clean.
func (r checkResult) Safe() bool {
	for _, f := range r.Files {
		if !f.Safe {
			return false
		}
	}
	return true
}

func cmdCheck(ctx context.Context, s stdio, args []string) int {
	fs := newFlagSet("check", s)
	fs.Usage = func() {
		fmt.Fprintln(s.err, "usage: codeagent check [--json] [--policy FILE] [--lang L] [--max-size SIZE] FILE...\n\nStatically check code for unsafe constructs before it runs. Exit status: 0 when\nevery file is clean, 1 when there are findings (a syntax error is one, and so is\na file too large or complex to check), 2 for usage errors, 130 on Ctrl-C.\nLint warnings (undefined names, unused imports, ...; \"warning\" in the output,\nkind \"lint\" in --json) are shown but do not change the exit status.\nFILE - reads standard input and needs --lang.\n\nflags:")
		printFlags(fs)
	}
	o := checkOptions{Stdin: s.in}
	fs.BoolVar(&o.JSON, "json", false, `print {"files":[{"file","safe","findings":[...],"lint":[...]}]}`)
	fs.StringVar(&o.PolicyFile, "policy", "", "YAML policy decoded on top of the built-in one")
	fs.StringVar(&o.Lang, "lang", "", "language: python, javascript, bash or go (default: from each file's extension)")
	sizeVar(fs, &o.MaxSize, "max-size", sizeBounds{min: 1 << 10, max: safety.MaxInputLimit},
		"largest file checked; a larger one is a finding (default 4MiB, or the policy's max_input_bytes)")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() == 0 {
		return usageLine(fs, s, "check needs the files to check (- reads standard input, with --lang)")
	}
	o.Files = fs.Args()
	res, err := runCheck(ctx, o)
	if code, ok := exitInterrupted(ctx, s.err, ""); ok {
		return code
	}
	if err != nil {
		return exitCodeFor(s.err, err)
	}
	if o.JSON {
		enc := json.NewEncoder(s.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return exitCodeFor(s.err, err)
		}
	} else {
		printCheck(s.out, res)
	}
	if !res.Safe() {
		return exitFailure
	}
	return exitOK
}

// runCheck reads every file first, so that a usage error (missing file,
// unknown language, invalid policy) stops the command before any output,
// then checks them in order.
func runCheck(ctx context.Context, o checkOptions) (checkResult, error) {
	policy := safety.DefaultPolicy()
	if o.PolicyFile != "" {
		p, err := safety.LoadPolicy(o.PolicyFile)
		if err != nil {
			return checkResult{}, usageError{fmt.Errorf("invalid policy: %w", err)}
		}
		policy = p
	}
	if o.MaxSize > 0 {
		policy.MaxInputBytes = int(o.MaxSize)
	}
	limit := int64(policy.InputLimit())
	var forced safety.Language
	if o.Lang != "" {
		l, err := safety.ParseLanguage(o.Lang)
		if err != nil {
			return checkResult{}, usageError{err}
		}
		forced = l
	}
	type input struct {
		name string
		lang safety.Language
	}
	inputs := make([]input, 0, len(o.Files))
	for _, name := range o.Files {
		lang := forced
		if lang == "" {
			l, ok := safety.LanguageForFile(name)
			if !ok {
				return checkResult{}, usagef("%s: cannot tell the language from the extension; pass --lang python, javascript, bash or go", name)
			}
			lang = l
		}
		if name == "-" && o.Stdin == nil {
			return checkResult{}, usagef("-: no standard input")
		}
		if name != "-" {
			if err := sourceFile(name); err != nil {
				return checkResult{}, usageError{err}
			}
		}
		inputs = append(inputs, input{name, lang})
	}
	c, err := app.NewChecker(policy) // an invalid policy is a usage error
	if err != nil {
		return checkResult{}, err
	}
	defer c.Close()
	// One file in memory at a time, each read no further than the limit.
	res := checkResult{Files: make([]checkFile, 0, len(inputs))}
	for _, in := range inputs {
		var code []byte
		if in.name == "-" {
			code, err = io.ReadAll(io.LimitReader(o.Stdin, limit+1))
		} else {
			code, err = readSource(in.name, limit)
		}
		if err != nil {
			return checkResult{}, usageError{err}
		}
		rep, err := c.Check(ctx, in.lang, code)
		if err != nil {
			return checkResult{}, fmt.Errorf("%s: %w", in.name, err)
		}
		res.Files = append(res.Files, checkFile{File: in.name, Safe: rep.Safe(), Findings: rep.Findings, Lint: rep.Lint})
	}
	return res, nil
}

// sourceFile refuses a missing file, a directory or a device.
func sourceFile(name string) error {
	st, err := os.Stat(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: no such file", name)
		}
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", name)
	}
	return nil
}

// readSource reads a regular file (see sourceFile). It reads at most
// limit+1 bytes: a larger file is reported by the checker as too large
// from those, and is never held whole.
func readSource(name string, limit int64) ([]byte, error) {
	if err := sourceFile(name); err != nil {
		return nil, err
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit+1))
}

// printCheck prints findings as "file:line:col rule message", and lint
// warnings as "file:line:col warning rule message", each followed by the
// offending text and a hint.
func printCheck(w io.Writer, r checkResult) {
	for _, f := range r.Files {
		for _, fi := range f.Findings {
			printFinding(w, f.File, "", fi)
		}
		for _, fi := range f.Lint {
			printFinding(w, f.File, "warning ", fi)
		}
	}
}

func printFinding(w io.Writer, file, prefix string, fi safety.Finding) {
	fmt.Fprintf(w, "%s:%d:%d %s%s %s\n", termtext.Name(file), fi.Line, fi.Column, prefix, fi.Rule, termtext.Name(fi.Message))
	if fi.Text != "" {
		fmt.Fprintf(w, "    code: %s\n", termtext.Name(fi.Text))
	}
	if fi.Hint != "" {
		fmt.Fprintf(w, "    hint: %s\n", termtext.Name(fi.Hint))
	}
}
