package app

import (
	"errors"
	"fmt"
)

// ErrInvalid is the class of a request that is the caller's to fix: each
// door maps it once (exit 2, HTTP 400, an MCP tool error naming the
// arguments).
var ErrInvalid = errors.New("invalid request")

// invalidf returns an error of class ErrInvalid whose message is the
// formatted text alone.
func invalidf(format string, a ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, a...)}
}

type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }
