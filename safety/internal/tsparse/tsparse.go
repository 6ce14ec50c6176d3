// Package tsparse parses source code with tree-sitter and returns the syntax
// tree as a flat Go slice.
//
// It talks to the tree-sitter C library that github.com/tree-sitter/go-tree-sitter
// compiles, but drives it directly: go-tree-sitter's Parse copies the rest of the
// input on every read callback and routes every allocation through Go, which
// made a 200-line file cost milliseconds. Here the parse reads the Go buffer in
// place, allocation uses libc, and the tree is flattened in one C call, so the
// analysers work on plain Go structs without further cgo calls.
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
}

// NewLanguage wraps a grammar pointer as returned by a grammar's Language().
func NewLanguage(ptr unsafe.Pointer) *Language {
	return &Language{ptr: ptr, lang: sitter.NewLanguage(ptr)}
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

// Parser parses one input at a time. It is not safe for concurrent use;
// pool parsers to share them.
type Parser struct {
	// Budget, when set, returns the longest a parse of n bytes may take.
	// tree-sitter's error recovery is quadratic on some hostile inputs
	// (thousands of unterminated quotes), so a budget linear in the size
	// keeps the check linear; a parse over budget returns ErrTooComplex.
	Budget func(n int) time.Duration

	p      *C.TSParser
	cancel *C.size_t // C memory, so a watcher goroutine may set it mid-parse
	lang   *Language
}

// NewParser returns a parser for lang. Close it when done.
func NewParser(lang *Language) (*Parser, error) {
	p := C.ts_parser_new()
	if !C.ts_parser_set_language(p, (*C.TSLanguage)(lang.ptr)) {
		C.ts_parser_delete(p)
		return nil, fmt.Errorf("tree-sitter: incompatible grammar version")
	}
	flag := (*C.size_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.size_t(0)))))
	return &Parser{p: p, cancel: flag, lang: lang}, nil
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
	if p.p == nil {
		return nil, errors.New("tree-sitter: parser is closed")
	}
	if uint64(len(src)) >= 1<<32-1 {
		return nil, errors.New("tree-sitter: input too large")
	}
	flag := (*uintptr)(unsafe.Pointer(p.cancel))
	atomic.StoreUintptr(flag, 0)
	parent := ctx
	if p.Budget != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Budget(len(src)))
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Set the C flag when ctx ends, and make sure the callback has finished
	// before returning: after that the parser (and its flag) may be freed.
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
	var srcPtr *C.char
	if len(src) > 0 {
		srcPtr = (*C.char)(unsafe.Pointer(&src[0]))
	} else {
		srcPtr = (*C.char)(unsafe.Pointer(&[1]byte{}))
	}
	t := C.sa_parse(p.p, srcPtr, C.uint32_t(len(src)), p.cancel)
	if t == nil && parent.Err() == nil && ctx.Err() != nil {
		return nil, ErrTooComplex
	}
	if t == nil {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCanceled, err)
		}
		return nil, ErrCanceled
	}
	defer C.ts_tree_delete(t)
	n := int(C.sa_count(t))
	if cap(buf) < n {
		buf = make([]Node, n)
	}
	buf = buf[:n]
	got := C.sa_flatten(t, (*C.sa_node)(unsafe.Pointer(&buf[0])), C.uint32_t(n))
	return buf[:int(got)], nil
}
