// Package tsparse parses source code with tree-sitter and returns the syntax
// tree as a flat Go slice.
//
// It talks to the tree-sitter C library that github.com/tree-sitter/go-tree-sitter
// compiles, but drives it directly: go-tree-sitter's Parse copies the rest of the
// input on every read callback and routes every allocation through Go, which
// made a 200-line file cost milliseconds. Here the parse reads the Go buffer in
// place, allocation uses libc, and the tree is flattened in one C call, so the
// analysers work on plain Go structs without further cgo calls.
//
// The flatten (flatten.c) reads tree-sitter's subtrees directly, using the
// internal layouts declared in tsinternal.h, which is about 5 times faster
// than walking with a TSTreeCursor; NewLanguage checks it against the
// cursor walk (sa_flatten in shim.c) and falls back to that when they
// disagree, for instance after a tree-sitter upgrade. The parse's time
// budget is checked in C, so a parse needs no timer or context goroutine.
package tsparse

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	sitter "github.com/tree-sitter/go-tree-sitter"
)

func init() {
	// go-tree-sitter installs allocator callbacks that re-enter Go for every
	// malloc and free. libc's allocator is what those callbacks call anyway,
	// so memory allocated before this switch can still be freed after it.
	C.sa_use_libc_allocator()
}

// Node flags.
const (
	Named   = 1 // a named node (not punctuation or a keyword)
	Missing = 2 // inserted by error recovery; has no text
	Extra   = 4 // may appear anywhere, e.g. a comment
)

// ErrorKind is the kind id tree-sitter gives to ERROR nodes.
const ErrorKind = 0xFFFF

// Node is one node of a flattened syntax tree. Nodes are in pre-order; the
// index fields point into the same slice and are -1 when absent.
type Node struct {
	Start, End  uint32 // byte offsets into the source
	Parent      int32
	FirstChild  int32
	NextSibling int32
	Kind        uint16 // the language's symbol id; ErrorKind for ERROR
	Field       uint16 // field id under the parent, 0 for none
	Flags       uint8
}

// Language is a tree-sitter grammar with name lookups for its kinds and fields.
type Language struct {
	ptr  unsafe.Pointer
	lang *sitter.Language
	// fast says that sa_flatten_fast, which reads tree-sitter's internal
	// layouts, agrees with the public-API sa_flatten on this grammar.
	fast bool
}

// NewLanguage wraps a grammar pointer as returned by a grammar's Language().
func NewLanguage(ptr unsafe.Pointer) *Language {
	l := &Language{ptr: ptr, lang: sitter.NewLanguage(ptr)}
	l.fast = l.fastFlattenAgrees()
	return l
}

// selfCheckSource is parsed by fastFlattenAgrees: in any of the grammars it
// has fields, aliases, extras, hidden nodes and syntax errors.
const selfCheckSource = "import os as o, sys\n" +
	"def f(a, *b, c=1, **d):\n    return [x for x in a if x] # c\n" +
	"x = f'{a!r:>{w}}' + `b` + \"s\\n\" if t else {k: v}\n" +
	"const g = (a, {b}) => a?.b ?? `t${c}`; // c\n" +
	"for f in *.txt; do echo \"$f\" | grep -c x > out; done <<EOF\nhi\nEOF\n" +
	") ] } (( [[ {{ \n"

// fastFlattenAgrees parses selfCheckSource and compares the two flattens,
// so that a tree-sitter runtime whose internal layouts differ from
// tsinternal.h falls back to the public API instead of misreading trees.
func (l *Language) fastFlattenAgrees() bool {
	p := C.ts_parser_new()
	defer C.ts_parser_delete(p)
	if !C.ts_parser_set_language(p, (*C.TSLanguage)(l.ptr)) {
		return false
	}
	c := (*C.sa_cancel)(C.calloc(1, C.size_t(unsafe.Sizeof(C.sa_cancel{}))))
	defer C.free(unsafe.Pointer(c))
	src := C.CString(selfCheckSource)
	defer C.free(unsafe.Pointer(src))
	t := C.sa_parse(p, src, C.uint32_t(len(selfCheckSource)), c, 0, 0)
	if t == nil {
		return false
	}
	defer C.ts_tree_delete(t)
	n := int(C.sa_count(t))
	a, b := make([]Node, n), make([]Node, n)
	na := C.sa_flatten(t, (*C.sa_node)(unsafe.Pointer(&a[0])), C.uint32_t(n))
	nb := C.sa_flatten_fast(t, (*C.sa_node)(unsafe.Pointer(&b[0])), C.uint32_t(n))
	if na != nb || int(na) != n {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// KindCount is the number of kind ids of the grammar.
func (l *Language) KindCount() int { return int(l.lang.NodeKindCount()) }

// KindName returns the name of a kind id and whether it is a named kind.
func (l *Language) KindName(id uint16) (string, bool) {
	return l.lang.NodeKindForId(id), l.lang.NodeKindIsNamed(id)
}

// FieldID returns the id of a field name, or 0 when the grammar has none.
func (l *Language) FieldID(name string) uint16 { return l.lang.FieldIdForName(name) }

// ErrCanceled is returned when the context ends during a parse.
var ErrCanceled = errors.New("parse canceled")

// ErrTooComplex is returned when a parse runs out of its time budget (see
// Parser.Budget), which happens only on pathological input.
var ErrTooComplex = errors.New("input too irregular to parse within the time budget")

// ErrTooLarge is returned when a parse runs out of its memory budget (see
// Parser.MemBudget): the input's syntax tree is too large to hold.
var ErrTooLarge = errors.New("input too large to parse within the memory budget")

// Parser parses one input at a time. It is not safe for concurrent use;
// pool parsers to share them.
type Parser struct {
	// Budget, when set, returns the longest a parse of n bytes may take.
	// tree-sitter's error recovery is quadratic on some hostile inputs
	// (thousands of unterminated quotes), so a budget linear in the size
	// keeps the check linear; a parse over budget returns ErrTooComplex.
	Budget func(n int) time.Duration
	// MemBudget, when set, returns the most memory a parse of n bytes may
	// hold: tree-sitter's tree and stacks while it parses, then those and
	// the flattened nodes. Dense code (a 6 MB expression) needs some
	// 250 bytes per input byte; a parse over budget returns ErrTooLarge.
	MemBudget func(n int) int64

	p      *C.TSParser
	cancel *C.sa_cancel // C memory, so a watcher goroutine may set it mid-parse
	lang   *Language
	// slowFlatten makes Parse use the public-API flatten (for tests).
	slowFlatten bool
}

// NewParser returns a parser for lang. Close it when done.
func NewParser(lang *Language) (*Parser, error) {
	p := C.ts_parser_new()
	if !C.ts_parser_set_language(p, (*C.TSLanguage)(lang.ptr)) {
		C.ts_parser_delete(p)
		return nil, fmt.Errorf("tree-sitter: incompatible grammar version")
	}
	c := (*C.sa_cancel)(C.calloc(1, C.size_t(unsafe.Sizeof(C.sa_cancel{}))))
	return &Parser{p: p, cancel: c, lang: lang}, nil
}

// renew replaces the tree-sitter parser with a fresh one.
func (p *Parser) renew() error {
	fresh := C.ts_parser_new()
	if !C.ts_parser_set_language(fresh, (*C.TSLanguage)(p.lang.ptr)) {
		C.ts_parser_delete(fresh)
		return fmt.Errorf("tree-sitter: incompatible grammar version")
	}
	C.ts_parser_delete(p.p)
	p.p = fresh
	return nil
}

// Close frees the parser. It is safe to call twice.
func (p *Parser) Close() {
	if p.p != nil {
		C.ts_parser_delete(p.p)
		C.free(unsafe.Pointer(p.cancel))
		p.p, p.cancel = nil, nil
	}
}

// Parse parses src and returns its nodes in pre-order, reusing buf's storage.
// It returns ErrCanceled when ctx ends first. src must be shorter than 4 GiB.
func (p *Parser) Parse(ctx context.Context, src []byte, buf []Node) ([]Node, error) {
	nodes, t, err := p.ParseKeep(ctx, src, buf)
	t.Free()
	return nodes, err
}

// Tree is a tree-sitter tree that ParseKeep left for the caller to free.
type Tree struct {
	t    *C.TSTree
	held int64 // what its parse held, to give a large tree's memory back
}

// Free frees the tree; it may be called on any goroutine, also while the
// parser parses again. Freeing a zero Tree does nothing.
func (t Tree) Free() {
	if t.t != nil {
		C.sa_tree_delete(t.t, C.int64_t(t.held))
	}
}

// ParseKeep is Parse, but returns the tree-sitter tree instead of freeing
// it, so that the caller can free it off its critical path (freeing takes
// about 3% of a parse). On error the Tree is zero.
func (p *Parser) ParseKeep(ctx context.Context, src []byte, buf []Node) ([]Node, Tree, error) {
	nodes, t, err := p.parse(ctx, src, buf)
	if t == nil {
		return nodes, Tree{}, err
	}
	return nodes, Tree{t, int64(p.cancel.mem_peak)}, err
}

func (p *Parser) parse(ctx context.Context, src []byte, buf []Node) ([]Node, *C.TSTree, error) {
	if p.p == nil {
		return nil, nil, errors.New("tree-sitter: parser is closed")
	}
	if uint64(len(src)) >= 1<<32-1 {
		return nil, nil, errors.New("tree-sitter: input too large")
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	flag := (*uintptr)(unsafe.Pointer(&p.cancel.flag))
	atomic.StoreUintptr(flag, 0)
	// The budget is checked in C (no timer needed); a context that can end
	// sets the C flag, and Parse makes sure the callback has finished before
	// returning: after that the parser (and its flag) may be freed.
	if ctx.Done() != nil {
		fired := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			atomic.StoreUintptr(flag, 1)
			close(fired)
		})
		defer func() {
			if !stop() {
				<-fired
			}
		}()
	}
	var budget, memLimit int64
	if p.Budget != nil {
		budget = max(1, int64(p.Budget(len(src))))
	}
	if p.MemBudget != nil {
		memLimit = max(1, p.MemBudget(len(src)))
	}
	var srcPtr *C.char
	if len(src) > 0 {
		srcPtr = (*C.char)(unsafe.Pointer(&src[0]))
	} else {
		srcPtr = (*C.char)(unsafe.Pointer(&[1]byte{}))
	}
	t := C.sa_parse(p.p, srcPtr, C.uint32_t(len(src)), p.cancel, C.int64_t(budget), C.int64_t(memLimit))
	if t == nil {
		// A parse stopped while tree-sitter balances the finished tree
		// leaves state that ts_parser_reset does not clear, and the next
		// parse would abort the process; a stopped parser is never reused.
		err := p.renew()
		C.sa_trim(p.cancel.mem_peak) // the stopped parse's memory is free now
		if err != nil {
			return nil, nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrCanceled, err)
		}
		if p.cancel.over_mem != 0 {
			return nil, nil, ErrTooLarge
		}
		if p.cancel.timed_out != 0 {
			return nil, nil, ErrTooComplex
		}
		return nil, nil, ErrCanceled
	}
	n := int(C.sa_count(t))
	if memLimit > 0 && int64(p.cancel.mem)+int64(n)*int64(unsafe.Sizeof(Node{})) > memLimit {
		C.sa_tree_delete(t, p.cancel.mem_peak)
		return nil, nil, ErrTooLarge
	}
	if cap(buf) < n {
		buf = make([]Node, n)
	}
	buf = buf[:n]
	out, size := (*C.sa_node)(unsafe.Pointer(&buf[0])), C.uint32_t(n)
	var got C.uint32_t
	if p.lang.fast && !p.slowFlatten {
		got = C.sa_flatten_fast(t, out, size)
	}
	if got == 0 {
		got = C.sa_flatten(t, out, size)
	}
	return buf[:int(got)], t, nil
}

// MemPeak is the most heap memory the last parse held in tree-sitter.
func (p *Parser) MemPeak() int64 { return int64(p.cancel.mem_peak) }

// callbacks is how many progress callbacks the last parse made; stopAt
// makes the next parses stop at callback n (0: never). For tests.
func (p *Parser) callbacks() int64 { return int64(p.cancel.calls) }
func (p *Parser) stopAt(n int64)   { p.cancel.stop_at = C.int64_t(n) }
