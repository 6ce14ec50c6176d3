package safety

import (
	"fmt"
	"strings"
)

// JavaScript lint: a variable read or assigned that no declaration in the
// file names and that node does not define throws a ReferenceError (or, when
// assigned in sloppy mode, quietly becomes a global). Declarations count
// file-wide, whatever their scope: that misses a use outside its block, but
// never warns about code that runs.

// jsGlobals are node 20's globals (globalThis's own properties in a
// script), the CommonJS module wrapper's variables and arguments.
var jsGlobals = newSet(strings.Fields(`
AbortController AbortSignal AggregateError Array ArrayBuffer Atomics BigInt BigInt64Array BigUint64Array Blob
Boolean BroadcastChannel Buffer ByteLengthQueuingStrategy CompressionStream CountQueuingStrategy Crypto
CryptoKey CustomEvent DOMException DataView Date DecompressionStream Error EvalError Event EventTarget File
FinalizationRegistry Float32Array Float64Array FormData Function Headers Infinity Int16Array Int32Array
Int8Array Intl JSON Map Math MessageChannel MessageEvent MessagePort NaN Number Object Performance
PerformanceEntry PerformanceMark PerformanceMeasure PerformanceObserver PerformanceObserverEntryList
PerformanceResourceTiming Promise Proxy RangeError ReadableByteStreamController ReadableStream
ReadableStreamBYOBReader ReadableStreamBYOBRequest ReadableStreamDefaultController
ReadableStreamDefaultReader ReferenceError Reflect RegExp Request Response Set SharedArrayBuffer String
SubtleCrypto Symbol SyntaxError TextDecoder TextDecoderStream TextEncoder TextEncoderStream TransformStream
TransformStreamDefaultController TypeError URIError URL URLSearchParams Uint16Array Uint32Array Uint8Array
Uint8ClampedArray WeakMap WeakRef WeakSet WebAssembly WritableStream WritableStreamDefaultController
WritableStreamDefaultWriter atob btoa clearImmediate clearInterval clearTimeout console crypto decodeURI
decodeURIComponent encodeURI encodeURIComponent escape eval fetch global globalThis isFinite isNaN parseFloat
parseInt performance process queueMicrotask setImmediate setInterval setTimeout structuredClone undefined
unescape
require module exports __dirname __filename arguments`))

// lint adds the JavaScript lint warnings for a tree without syntax errors.
func (f *jsFile) lint() {
	t := f.t
	declared := set{}
	var refs []int32
	for i := int32(0); i < int32(len(t.nodes)); i++ {
		switch t.kind(i) {
		case jsWith:
			return // with (o) makes every name a possible property
		case jsShorthandPattern:
			declared[t.text(i)] = true
		case jsShorthandProperty:
			refs = append(refs, i)
		case jsIdentifier:
			if f.declares(i) {
				declared[t.text(i)] = true
			} else if f.isUse(i) {
				refs = append(refs, i)
			}
		}
	}
	for _, i := range refs {
		name := t.text(i)
		if declared[name] || jsGlobals[name] {
			continue
		}
		declared[name] = true // one warning per name
		msg := fmt.Sprintf("'%s' is not declared", name)
		if p := t.parent(i); t.kind(p) == jsAssignment && t.fieldOf(i) == f.f.left {
			msg = fmt.Sprintf("'%s' is assigned but never declared: a ReferenceError in strict mode, a global otherwise", name)
		}
		s, e := t.span(i)
		f.out.lint.add(RuleUndeclaredGlobal, s, e, msg,
			fmt.Sprintf("declare %s with const or let (or import it) before using it, or check the spelling", name))
	}
}

// declares reports whether identifier i is a name a declaration binds (or,
// leniently, a destructuring assignment's target).
func (f *jsFile) declares(i int32) bool {
	t := f.t
	p := t.parent(i)
	field := t.fieldOf(i)
	switch t.kind(p) {
	case jsVarDeclarator, jsFunctionDecl, jsFunctionExpr, jsClassDecl, jsClass:
		return field == f.f.name
	case jsFormalParams, jsArrayPattern, jsRestPattern, jsImportClause, jsNamespaceImport:
		return true
	case jsArrow:
		return field == f.f.parameter
	case jsAssignPattern:
		return field == f.f.left
	case jsPairPattern:
		return field == f.f.value
	case jsCatch:
		return field == f.f.parameter
	case jsImportSpecifier:
		return field == f.f.alias || t.child(p, f.f.alias) < 0
	case jsForIn:
		return field == f.f.left && t.child(p, f.f.kind) >= 0
	}
	return false
}

// isUse reports whether identifier i reads or assigns a variable: not the
// export name of an import or export, and not the operand of typeof.
func (f *jsFile) isUse(i int32) bool {
	t := f.t
	p := t.parent(i)
	switch t.kind(p) {
	case jsImportSpecifier:
		return false
	case jsExportSpecifier:
		return t.fieldOf(i) == f.f.name
	case jsUnary:
		return !strings.HasPrefix(t.text(p), "typeof")
	}
	return true
}
