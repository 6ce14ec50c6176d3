package tsparse

/*
#include "shim.h"
*/
import "C"

import "unsafe"

// Compile-time guard that Node mirrors the C struct sa_flatten writes: each
// index below is zero only when the sizes or offsets agree, and any other
// constant index is out of range for layoutCheck.
var layoutCheck [1]struct{}

var (
	_ = layoutCheck[unsafe.Sizeof(Node{})^unsafe.Sizeof(C.sa_node{})]
	_ = layoutCheck[unsafe.Offsetof(Node{}.Start)^unsafe.Offsetof(C.sa_node{}.start)]
	_ = layoutCheck[unsafe.Offsetof(Node{}.End)^unsafe.Offsetof(C.sa_node{}.end)]
	_ = layoutCheck[unsafe.Offsetof(Node{}.Parent)^unsafe.Offsetof(C.sa_node{}.parent)]
	_ = layoutCheck[unsafe.Offsetof(Node{}.FirstChild)^unsafe.Offsetof(C.sa_node{}.first_child)]
	_ = layoutCheck[unsafe.Offsetof(Node{}.NextSibling)^unsafe.Offsetof(C.sa_node{}.next_sibling)]
	_ = layoutCheck[unsafe.Offsetof(Node{}.Kind)^unsafe.Offsetof(C.sa_node{}.kind)]
	_ = layoutCheck[unsafe.Offsetof(Node{}.Field)^unsafe.Offsetof(C.sa_node{}.field)]
	_ = layoutCheck[unsafe.Offsetof(Node{}.Flags)^unsafe.Offsetof(C.sa_node{}.flags)]
)
