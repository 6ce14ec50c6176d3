package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/codeagent/codeagent/sandbox"
)

// When codeagent is not root it cannot own the staged files it gives the
// program, nor read or remove what the program, another uid, made of them:
// a file of mode 0600 or a directory of 0700. handBack bridges that, after
// the program and all its processes are gone, by running one command in the
// container as the program's uid, which owns those entries.

// handBack lists the permission bits of every entry the program's uid owns
// in the staged workspace (what stageOut gives the copies) and then opens
// them up: owner and others may read and write, and search directories,
// and no directory stays sticky. Directories are opened as they are
// visited, before find reads them. A container that was killed is started
// again first; its mounts are those it was created with.
func (b *Backend) handBack(bx *box, killed bool) (map[string]fs.FileMode, error) {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	if err := b.ensureRunning(ctx, bx, killed); err != nil {
		return nil, err
	}
	cmd := []string{"/usr/bin/env", "-i", "PATH=/usr/bin:/bin",
		"find", sandbox.WorkspacePath, "-mindepth", "1", "-user", strconv.Itoa(bx.uid), "!", "-type", "l",
		"-printf", `%m %P\0`,
		"(", "-type", "d", "-exec", "chmod", "u+rwx,o+rwx,-t", "{}", ";", "-o", "-exec", "chmod", "u+rw,o+r", "{}", "+", ")"}
	out, err := b.execOutput(ctx, bx, cmd)
	if err != nil {
		return nil, err
	}
	modes := map[string]fs.FileMode{}
	for _, rec := range bytes.Split(out, []byte{0}) {
		m, rel, ok := strings.Cut(string(rec), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(m, 8, 32)
		if err != nil {
			return nil, fmt.Errorf("mode %q of %s: %w", m, rel, err)
		}
		modes[rel] = fs.FileMode(n).Perm()
	}
	return modes, nil
}

// ensureRunning starts bx's container again when it stopped, first waiting
// for it to stop when it was killed.
func (b *Backend) ensureRunning(ctx context.Context, bx *box, killed bool) error {
	if killed {
		w := b.cli.ContainerWait(ctx, bx.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		select {
		case <-w.Result:
		case err := <-w.Error:
			return fmt.Errorf("wait for container: %w", err)
		}
	}
	ins, err := b.cli.ContainerInspect(ctx, bx.id, client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("inspect container: %w", err)
	}
	if st := ins.Container.State; st != nil && st.Running {
		return nil
	}
	if _, err := b.cli.ContainerStart(ctx, bx.id, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("restart container: %w", err)
	}
	return nil
}

// maxListing bounds handBack's output: maxEntries paths of up to a few
// hundred bytes.
const maxListing = 64 << 20

// execOutput runs cmd in bx's container as the program's user and returns
// its standard output; an exit status other than 0 is an error.
func (b *Backend) execOutput(ctx context.Context, bx *box, cmd []string) ([]byte, error) {
	ec, err := b.cli.ExecCreate(ctx, bx.id, client.ExecCreateOptions{
		User: bx.user, AttachStdout: true, AttachStderr: true, WorkingDir: "/", Cmd: cmd,
	})
	if err != nil {
		return nil, fmt.Errorf("create exec: %w", err)
	}
	att, err := b.cli.ExecAttach(ctx, ec.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("start exec: %w", err)
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, att.Close)
	defer stop()
	stdout := &sandbox.CappedBuffer{Cap: maxListing}
	stderr := &sandbox.CappedBuffer{Cap: 4096}
	if _, err := stdcopy.StdCopy(stdout, stderr, att.Reader); err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("read exec: %w", ctx.Err())
	}
	if stdout.Truncated() {
		return nil, errors.New("listing too long")
	}
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		ins, err := b.cli.ExecInspect(ctx, ec.ID, client.ExecInspectOptions{})
		if err != nil {
			return nil, fmt.Errorf("inspect exec: %w", err)
		}
		if !ins.Running {
			if ins.ExitCode != 0 {
				return nil, fmt.Errorf("%s exited with %d: %s", cmd[3], ins.ExitCode, bytes.TrimSpace(stderr.Bytes()))
			}
			return stdout.Bytes(), nil
		}
		time.Sleep(delay)
	}
}
