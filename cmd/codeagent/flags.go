package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/codeagent/codeagent/sandbox"
)

// sizeFlag is a byte size flag such as --memory 256MiB.
type sizeFlag struct{ n *int64 }

func (f sizeFlag) String() string {
	if f.n == nil || *f.n == 0 {
		return ""
	}
	return sandbox.FormatSize(*f.n)
}

func (f sizeFlag) Set(s string) error {
	v, err := sandbox.ParseSize(s)
	if err != nil {
		return err
	}
	if v <= 0 {
		return fmt.Errorf("size must be positive")
	}
	*f.n = v
	return nil
}

// cpusFlag is a CPU limit in cores such as --cpus 1.5.
type cpusFlag struct{ n *float64 }

func (f cpusFlag) String() string {
	if f.n == nil || *f.n == 0 {
		return ""
	}
	return strconv.FormatFloat(*f.n, 'g', -1, 64)
}

func (f cpusFlag) Set(s string) error {
	v, err := sandbox.ParseCPUs(s)
	if err != nil {
		return err
	}
	*f.n = v
	return nil
}

// envFlag collects repeated --env K=V.
type envFlag map[string]string

func (e envFlag) String() string { return "" }

func (e envFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || strings.ContainsAny(k, "\x00") || strings.ContainsRune(v, 0) {
		return fmt.Errorf("want K=V, got %q", s)
	}
	e[k] = v
	return nil
}
