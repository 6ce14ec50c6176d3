package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/sandbox"
)

// Flag values are checked where they are parsed, in the flag.Value types
// below: a value out of its bounds fails the parse, which prints
// `invalid value "-1s" for flag -timeout: ...` and the command's usage and
// exits 2 (exitUsage). Every duration and size flag of every command goes
// through them; the bounds are here.
var (
	// boundProgramTime bounds the wall time of one program run: at least
	// what any door accepts (app.MinLimits).
	boundProgramTime = durationBounds{min: app.MinLimits.WallTime, max: 24 * time.Hour}
	// boundRequestTime bounds one model request (--llm-timeout).
	boundRequestTime = durationBounds{max: 24 * time.Hour}
	// boundTaskTime bounds one evaluation task; 0 means none.
	boundTaskTime = durationBounds{zero: "none", max: 7 * 24 * time.Hour}
	// boundShutdown bounds the wait at shutdown; 0 means none.
	boundShutdown = durationBounds{zero: "no wait", max: 24 * time.Hour}

	// The least a program's memory and disk may be are every door's
	// (app.MinLimits): below them no program starts.
	boundMemory = sizeBounds{min: app.MinLimits.Memory, max: 1 << 40}
	boundDisk   = sizeBounds{min: app.MinLimits.Disk, max: 1 << 40}
	boundUpload = sizeBounds{min: 1, max: 1 << 40}
)

// durationBounds are the values a duration flag accepts: positive up to
// max, and 0 only when zero says what it means.
type durationBounds struct {
	zero     string // what 0 means; "" when 0 is refused
	min, max time.Duration
}

// durationFlag is a time.Duration flag with bounds.
type durationFlag struct {
	d *time.Duration
	b durationBounds
}

// durationVar registers a bounded duration flag with default def.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, b durationBounds, usage string) {
	*p = def
	fs.Var(durationFlag{p, b}, name, usage)
}

func (f durationFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	switch {
	case err != nil:
		return errors.New("want a duration such as 30s, 5m or 1h30m")
	case v < 0:
		return errors.New("a duration must not be negative")
	case v == 0 && f.b.zero == "":
		return errors.New("0 means nothing here: want a positive duration such as 30s")
	case v > f.b.max:
		return fmt.Errorf("%s is more than the most this flag accepts, %s", v, f.b.max)
	case v > 0 && v < f.b.min:
		return fmt.Errorf("%s is less than the least this flag accepts, %s", v, f.b.min)
	}
	*f.d = v
	return nil
}

// sizeBounds are the byte sizes a size flag accepts: 0 only when min is
// 0 (envs prune --max 0: every environment not in use).
type sizeBounds struct{ min, max int64 }

// sizeFlag is a byte size flag such as --memory 256MiB.
type sizeFlag struct {
	n *int64
	b sizeBounds
}

// sizeVar registers a bounded size flag; *p keeps its value as the default.
func sizeVar(fs *flag.FlagSet, p *int64, name string, b sizeBounds, usage string) {
	fs.Var(sizeFlag{p, b}, name, usage)
}

func (f sizeFlag) String() string {
	if f.n == nil || *f.n == 0 {
		return ""
	}
	return sandbox.FormatSize(*f.n)
}

func (f sizeFlag) Set(s string) error {
	v, err := sandbox.ParseSize(s)
	switch {
	case err != nil:
		return err
	case v <= 0 && f.b.min > 0:
		return fmt.Errorf("size must be positive")
	case v < f.b.min:
		return fmt.Errorf("%s is less than the least this flag accepts, %s", sandbox.FormatSize(v), sandbox.FormatSize(f.b.min))
	case f.b.max > 0 && v > f.b.max:
		return fmt.Errorf("%s is more than the most this flag accepts, %s", sandbox.FormatSize(v), sandbox.FormatSize(f.b.max))
	}
	*f.n = v
	return nil
}

// intFlag is an int flag with bounds; max 0 leaves the most to the
// command (a ceiling app checks at every door, as --max-steps').
type intFlag struct {
	n        *int
	min, max int
}

// intVar registers a bounded int flag with default def (max 0: none here).
func intVar(fs *flag.FlagSet, p *int, name string, def, min, max int, usage string) {
	*p = def
	fs.Var(intFlag{p, min, max}, name, usage)
}

func (f intFlag) String() string {
	if f.n == nil {
		return ""
	}
	return strconv.Itoa(*f.n)
}

func (f intFlag) Set(s string) error {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	switch {
	case f.max == 0 && (err != nil || v < f.min):
		return fmt.Errorf("want a whole number of at least %d", f.min)
	case f.max != 0 && (err != nil || v < f.min || v > f.max):
		return fmt.Errorf("want a whole number from %d to %d", f.min, f.max)
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
