//go:build linux && (amd64 || arm64)

package namespace

import (
	"fmt"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/codeagent/codeagent/sandbox"
)

// bindOption is one of a spec's Binds as bwrap takes it: from src, a path
// bwrap sees, to dst in the sandbox.
type bindOption struct{ src, dst string }

// bindPoint is where, in a launcher's private mount namespace, the i-th
// bind of a spec is attached for bwrap (see prepareMountDir).
func (b *Backend) bindPoint(i int) string {
	return filepath.Join(b.mnt, "bind", strconv.Itoa(i))
}

// attachBinds readies spec's Binds for launcher l. Run as root, the
// launcher's root holds only what bwrap binds (see startInMinimalRoot):
// each source is opened without following links, its mount cloned
// read-only, nosuid and nodev (what is mounted below it left out), and
// moved to its bind point in the launcher's namespace. Run by an ordinary
// user, bwrap binds the source itself, read-only.
func (b *Backend) attachBinds(l *launcher, binds []sandbox.Bind) ([]bindOption, error) {
	out := make([]bindOption, len(binds))
	for i, bd := range binds {
		out[i] = bindOption{bd.Source, bd.Path}
		if !b.asRoot() {
			continue
		}
		dir, err := sandbox.OpenWorkspace(bd.Source)
		if err != nil {
			return nil, fmt.Errorf("bind %s: %w", bd.Source, err)
		}
		tree, err := cloneWorkspace(dir, unix.MOUNT_ATTR_RDONLY, false)
		dir.Close()
		if err != nil {
			return nil, fmt.Errorf("bind %s: %w", bd.Source, err)
		}
		point := b.bindPoint(i)
		err = inMountNamespace(l.cmd.Process.Pid, func() error {
			return unix.MoveMount(tree, "", unix.AT_FDCWD, point, unix.MOVE_MOUNT_F_EMPTY_PATH)
		})
		unix.Close(tree)
		if err != nil {
			return nil, fmt.Errorf("bind %s: %w", bd.Source, err)
		}
		out[i].src = point
	}
	return out, nil
}

// bindOptions are bwrap's options for binds.
func bindOptions(binds []bindOption) []string {
	var args []string
	for _, bd := range binds {
		args = append(args, "--ro-bind", bd.src, bd.dst)
	}
	return args
}
