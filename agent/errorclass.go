package agent

import (
	"strings"

	"github.com/codeagent/codeagent/internal/lazyre"
	"github.com/codeagent/codeagent/safety"
	"github.com/codeagent/codeagent/sandbox"
)

// ErrorClass is why an attempt failed; "" means it did not.
type ErrorClass string

// Error classes, stable in JSON output and events.
const (
	ClassNone       ErrorClass = ""
	ClassSyntax     ErrorClass = "syntax"     // SyntaxError, IndentationError, a parse finding
	ClassName       ErrorClass = "name"       // NameError, UnboundLocalError, ReferenceError
	ClassImport     ErrorClass = "import"     // ImportError, ModuleNotFoundError
	ClassFile       ErrorClass = "file"       // FileNotFoundError, IsADirectoryError, PermissionError
	ClassValue      ErrorClass = "value"      // KeyError, TypeError, ValueError, IndexError, AttributeError
	ClassAssertion  ErrorClass = "assertion"  // AssertionError, failing tests
	ClassTimeout    ErrorClass = "timeout"    // killed at the time limit
	ClassMemory     ErrorClass = "memory"     // killed at the memory limit
	ClassSafety     ErrorClass = "safety"     // rejected by the static checker
	ClassIncomplete ErrorClass = "incomplete" // ran, but the verifier says the task is not done
	ClassNoCode     ErrorClass = "no_code"    // the answer held no code
	ClassRuntime    ErrorClass = "runtime"    // any other failure of the program
	ClassOther      ErrorClass = "other"      // a failure outside the program (signal, sandbox)
	ClassRejected   ErrorClass = "rejected"   // not run: a person or the reviewer rejected it
)

// exceptionClasses maps exception names (Python, and node's where they
// differ) to classes.
var exceptionClasses = map[string]ErrorClass{
	"SyntaxError": ClassSyntax, "IndentationError": ClassSyntax, "TabError": ClassSyntax,
	"NameError": ClassName, "UnboundLocalError": ClassName, "ReferenceError": ClassName,
	"ImportError": ClassImport, "ModuleNotFoundError": ClassImport,
	"FileNotFoundError": ClassFile, "IsADirectoryError": ClassFile, "NotADirectoryError": ClassFile,
	"PermissionError": ClassFile, "FileExistsError": ClassFile, "EmptyDataError": ClassFile,
	"KeyError": ClassValue, "TypeError": ClassValue, "ValueError": ClassValue, "IndexError": ClassValue,
	"AttributeError": ClassValue, "ZeroDivisionError": ClassValue, "OverflowError": ClassValue,
	"UnicodeDecodeError": ClassValue, "UnicodeEncodeError": ClassValue, "JSONDecodeError": ClassValue,
	"ParserError": ClassValue, "RangeError": ClassValue, "LookupError": ClassValue,
	"AssertionError": ClassAssertion,
	"MemoryError":    ClassMemory,
}

// exceptionLine matches a line that names an exception: Python's last
// traceback line ("KeyError: 'x'", "pandas.errors.ParserError: ..."),
// pytest's "E   NameError: ..." and "FAILED t.py::test - KeyError: ...",
// and node's "TypeError: ...".
var exceptionLine = lazyre.New(`(?:^|^E\s+|\s-\s)((?:[A-Za-z_][A-Za-z0-9_]*\.)*([A-Za-z_][A-Za-z0-9_]*(?:Error|Exception|Exit|Interrupt)))(?::|$)`)

// shellFile and shellName recognise bash's own error messages.
var (
	shellFile = lazyre.New(`: No such file or directory$|: Is a directory$|: Permission denied$`)
	shellName = lazyre.New(`: command not found$`)
)

// Exception returns the name of the last exception reported in text (a
// traceback or test output), unqualified, or "".
func Exception(text string) string {
	lines := strings.Split(text, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimRight(lines[i], "\r ")
		if m := exceptionLine.FindStringSubmatch(l); m != nil {
			return m[2]
		}
	}
	return ""
}

// Classify returns the class of a program's failure from its sandbox
// result and the text it reported errors in (stderr, or pytest's output).
// A successful result is ClassNone.
func Classify(res sandbox.Result, text string) ErrorClass {
	switch res.Status {
	case sandbox.StatusOK:
		return ClassNone
	case sandbox.StatusTimeout:
		return ClassTimeout
	case sandbox.StatusMemoryLimit:
		return ClassMemory
	case sandbox.StatusSignaled, sandbox.StatusSandboxError:
		return ClassOther
	}
	if exc := Exception(text); exc != "" {
		if c, ok := exceptionClasses[exc]; ok {
			return c
		}
		if strings.HasPrefix(exc, "Assert") {
			return ClassAssertion
		}
		return ClassRuntime
	}
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case shellName.MatchString(l):
			return ClassName
		case shellFile.MatchString(l), strings.Contains(l, "ENOENT"):
			return ClassFile
		case strings.Contains(l, "Cannot find module"):
			return ClassImport
		}
	}
	return ClassRuntime
}

// ClassifyFindings returns the class of a rejection by the checker: syntax
// when every finding is a parse error, safety otherwise.
func ClassifyFindings(fs []safety.Finding) ErrorClass {
	if len(fs) == 0 {
		return ClassNone
	}
	for _, f := range fs {
		if f.Rule != safety.RuleSyntaxError {
			return ClassSafety
		}
	}
	return ClassSyntax
}
