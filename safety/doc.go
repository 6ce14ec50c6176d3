// Package safety statically checks generated code before it runs and says
// precisely what to change.
//
// It parses Python, JavaScript (node) and bash with tree-sitter and applies
// rules driven by a Policy (YAML; DefaultPolicy is embedded from
// default_policy.yaml). Each Finding carries a stable rule id, a 1-based line
// and character column, the offending text, a one-line message and a hint
// that a model can act on.
//
// The checker is not the security boundary (the sandbox is). It aims to be
// hard to fool: names are NFKC-normalised as Python does, any reference to a
// forbidden builtin counts (aliases, decorators, default arguments), string
// escapes are decoded before looking for introspection names, format
// templates are parsed, and import aliases are resolved so that np.load and
// from pandas import read_pickle are recognised. It also aims not to nag:
// methods named eval or compile, words in strings and comments, relative
// paths and while-True loops with a break are fine.
//
// Hostile input is bounded, in time and memory per input byte: inputs over
// max_input_bytes (default 4 MiB) are reported, not parsed; a parse stops
// at its time budget (2 s plus 2 µs per byte) and at its memory budget
// (128 MiB plus parse_memory_per_byte, default 96, per byte, counted in
// tree-sitter's allocator) with a finding that says the code is too large
// or complex to check; memory of a large parse goes back to the system;
// trees are walked iteratively over a flat node array; parsing stops when
// the context ends; invalid UTF-8 and NUL bytes are findings.
//
// Use one Checker for many checks: it pools parsers and is safe for
// concurrent use.
//
//	c, err := safety.New(nil) // the default policy
//	defer c.Close()
//	rep, err := c.Check(ctx, safety.Python, code)
//	for _, f := range rep.Findings { ... }
package safety
