//go:build linux && (amd64 || arm64)

package namespace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The freezer stops every process of a sandbox at once, and lets them go
// on, without their knowing: a kernel's sandbox is frozen while its copy
// of the workspace and the workspace are synchronised, so that no process
// of it changes either meanwhile. Version 2 has it in every group
// (cgroup.freeze); version 1 has a hierarchy of its own, which a sandbox
// joins only when it needs it (JoinFreezer), since each move costs a
// grace period.

// freezer is implemented by run cgroups.
type freezer interface {
	// JoinFreezer puts process pid, and what it starts afterwards, under
	// the freezer (version 2: nothing to do).
	JoinFreezer(pid int) error
	// Freeze stops every process under the freezer and waits until they
	// are stopped; Thaw lets them go on.
	Freeze() error
	Thaw() error
}

// freezeTimeout bounds the wait for a group to be frozen.
const freezeTimeout = 5 * time.Second

// v1FreezerParent is the freezer hierarchy's codeagent directory, made if
// missing, or "" when there is no freezer.
func v1FreezerParent(mounts []mountInfo, self map[string]string) string {
	for _, m := range mounts {
		if m.fstype != "cgroup" || !slices.Contains(strings.Split(m.super, ","), "freezer") {
			continue
		}
		own, ok := self["freezer"]
		if !ok {
			own = "/"
		}
		parent := filepath.Join(hostPath(m, own), cgroupParentName)
		if os.MkdirAll(parent, 0o755) != nil {
			return ""
		}
		return parent
	}
	return ""
}

func (r *v1Run) JoinFreezer(pid int) error {
	if r.freezerParent == "" {
		return errors.New("no cgroup v1 freezer is mounted")
	}
	if r.freezer == "" {
		dir := filepath.Join(r.freezerParent, r.id)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create freezer cgroup: %w", err)
		}
		r.freezer = dir
	}
	if err := writeFile(filepath.Join(r.freezer, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
		return fmt.Errorf("join freezer cgroup: %w", err)
	}
	return nil
}

func (r *v1Run) Freeze() error {
	if r.freezer == "" {
		return errors.New("the sandbox has not joined the freezer")
	}
	state := filepath.Join(r.freezer, "freezer.state")
	if err := writeFile(state, "FROZEN"); err != nil {
		return fmt.Errorf("freeze: %w", err)
	}
	return waitFor(func() bool {
		b, err := os.ReadFile(state)
		return err == nil && strings.TrimSpace(string(b)) == "FROZEN"
	})
}

func (r *v1Run) Thaw() error {
	if r.freezer == "" {
		return nil
	}
	return writeFile(filepath.Join(r.freezer, "freezer.state"), "THAWED")
}

func (r *v2Run) JoinFreezer(int) error { return nil }

func (r *v2Run) Freeze() error {
	if err := writeFile(filepath.Join(r.dir, "cgroup.freeze"), "1"); err != nil {
		return fmt.Errorf("freeze: %w", err)
	}
	return waitFor(func() bool { return readKeyed(filepath.Join(r.dir, "cgroup.events"), "frozen") == 1 })
}

func (r *v2Run) Thaw() error {
	err := writeFile(filepath.Join(r.dir, "cgroup.freeze"), "0")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// waitFor polls done, more slowly as it goes, until it holds or
// freezeTimeout passes.
func waitFor(done func() bool) error {
	deadline := time.Now().Add(freezeTimeout)
	for delay := 50 * time.Microsecond; ; delay = min(2*delay, 10*time.Millisecond) {
		if done() {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the sandbox did not freeze in time")
		}
		time.Sleep(delay)
	}
}

// thawDir thaws whatever group dir is, of either version, for a sweep.
func thawDir(dir string) {
	_ = writeFile(filepath.Join(dir, "freezer.state"), "THAWED")
	_ = writeFile(filepath.Join(dir, "cgroup.freeze"), "0")
}
