package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/codeagent/codeagent/procid"
	"github.com/codeagent/codeagent/sandbox"
)

// Labels on everything the backend creates.
const (
	labelManaged = "io.codeagent.managed" // "true"
	labelPool    = "io.codeagent.pool"    // the pool's id
	labelCreated = "io.codeagent.created" // unix seconds
	labelOwner   = "io.codeagent.owner"   // host/boot id/pid/start time of the creating process
	labelState   = "io.codeagent.state"   // the pool's host state directory
)

// class is what a container fixes at creation: the limits that the engine
// enforces (memory, processes, /tmp size, CPU quota) and the image.
// Executions with the same class can share a pool.
type class struct {
	Image     string
	Memory    int64
	Processes int
	Disk      int64
	CPUs      float64
}

func classOf(lim sandbox.Limits, cfg Config) class {
	lim = lim.WithDefaults()
	return class{Image: cfg.Image, Memory: lim.Memory, Processes: lim.Processes, Disk: lim.Disk, CPUs: lim.CPUs}
}

func (c class) key() string {
	return fmt.Sprintf("%s/m%d/p%d/d%d/c%g", c.Image, c.Memory, c.Processes, c.Disk, c.CPUs)
}

// maskedPaths replace the engine's list: sandbox.MaskedProc (which holds
// the engine's /proc entries) and /sys, so programs see no host devices,
// as in the namespace backend, which has no /sys at all.
var maskedPaths = append(append([]string(nil), sandbox.MaskedProc...), "/sys/firmware", "/sys/devices/virtual/powercap", "/sys")

// box is one container with its host directories: ws is mounted read-write
// at /workspace, code read-only at /code.
type box struct {
	id       string
	dir      string
	ws, code string
	binds    []sandbox.Bind // mounted read-only; a box with binds serves only the spec it was made for
	uid      int            // the host uid and gid its programs run as
	user     string         // uid:gid, for the engine
	ownsUID  bool           // uid was taken from the backend's pool, to be given back once the container is gone
	class    class
	created  time.Time
	cg       cgroupFiles // empty when the engine is not local

	ran, handedBack bool       // a program ran; handBack opened up what it left
	sfs             *stagingFS // the staging file system, or nil
	lifeline        *os.File   // the writing end of the container's lifeline (see lifeline.go)
}

// createBox creates and starts a container of class c with binds whose
// first process waits on its lifeline (see lifeline.go), ready for one exec.
func (b *Backend) createBox(ctx context.Context, c class, binds []sandbox.Bind) (*box, error) {
	dir, err := os.MkdirTemp(b.pool.dir, "box-")
	if err != nil {
		return nil, fmt.Errorf("create box directory: %w", err)
	}
	bx := &box{dir: dir, ws: filepath.Join(dir, "ws"), code: filepath.Join(dir, "code"), class: c, created: time.Now(), binds: slices.Clone(binds)}
	// Until the container exists, a failure undoes everything here.
	undo := func() {
		if bx.lifeline != nil {
			_ = bx.lifeline.Close()
		}
		_ = removeTree(dir)
		b.releaseUID(bx)
	}
	if err := b.takeUID(bx); err != nil {
		undo()
		return nil, err
	}
	passwd, group := filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	if err := writeAccounts(passwd, group, bx.uid); err != nil {
		undo()
		return nil, err
	}
	if err := b.prepareDirs(bx); err != nil {
		undo()
		return nil, err
	}
	life, lifePath, err := openLifeline(dir)
	if err != nil {
		undo()
		return nil, err
	}
	bx.lifeline = life
	pids := int64(c.Processes)
	sc, err := seccompOpt()
	if err != nil {
		undo()
		return nil, err
	}
	hc := &container.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    slices.DeleteFunc([]string{"no-new-privileges", sc}, func(s string) bool { return s == "" }),
		MaskedPaths:    maskedPaths,
		IpcMode:        "private",
		Tmpfs:          map[string]string{"/tmp": fmt.Sprintf("rw,exec,nosuid,nodev,size=%d,mode=1777", c.Disk)},
		ShmSize:        min(c.Disk, 64<<20),
		LogConfig:      container.LogConfig{Type: "none"},
		Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: bx.ws, Target: sandbox.WorkspacePath},
			{Type: mount.TypeBind, Source: bx.code, Target: CodePath, ReadOnly: true},
			{Type: mount.TypeBind, Source: passwd, Target: "/etc/passwd", ReadOnly: true},
			{Type: mount.TypeBind, Source: group, Target: "/etc/group", ReadOnly: true},
			{Type: mount.TypeBind, Source: lifePath, Target: lifelinePath, ReadOnly: true},
		},
		Resources: container.Resources{
			Memory:     c.Memory,
			MemorySwap: c.Memory,
			NanoCPUs:   int64(c.CPUs * 1e9),
			PidsLimit:  &pids,
			Ulimits:    []*container.Ulimit{{Name: "core", Soft: 0, Hard: 0}},
		},
	}
	hc.Mounts = append(hc.Mounts, bindMounts(bx.binds)...)
	cfg := &container.Config{
		Image:           c.Image,
		Cmd:             lifelineInit,
		User:            bx.user,
		WorkingDir:      sandbox.WorkspacePath,
		NetworkDisabled: true,
		Labels:          b.labels(),
	}
	var tcp int64
	if b.v1 {
		tcp = tcpLimit(c.Memory)
	}
	if bx.id, err = b.createContainer(ctx, cfg, hc, tcp); err != nil {
		// A container the engine made all the same was never started:
		// no process has its uid (Close or a later sweep removes it).
		undo()
		return nil, fmt.Errorf("create container: %w", err)
	}
	if _, err := b.cli.ContainerStart(ctx, bx.id, client.ContainerStartOptions{}); err != nil {
		b.destroy(bx)
		return nil, fmt.Errorf("start container: %w", err)
	}
	if ins, err := b.cli.ContainerInspect(ctx, bx.id, client.ContainerInspectOptions{}); err == nil && ins.Container.State != nil && ins.Container.State.Pid > 0 {
		if cg, err := findCgroup(ins.Container.State.Pid); err == nil {
			bx.cg = cg
		} else {
			b.log.Debug("docker: container cgroup not visible; using the API", "err", err)
		}
		if bx.sfs != nil && !bx.sfs.visibleIn(ins.Container.State.Pid) {
			b.staging.Store(false)
			b.destroy(bx)
			return nil, errors.New("the engine does not see the staging file system; staging in plain directories from now on")
		}
	}
	if b.v1 {
		if err := checkTCPLimit(bx.cg, tcp); err != nil && !b.cfg.AllowWeakIsolation {
			b.destroy(bx)
			return nil, err
		} else if err != nil {
			b.weakOnce.Do(func() { b.log.Warn("docker: socket buffers are not limited (weak isolation accepted)", "err", err) })
		}
	}
	return bx, nil
}

// bindMounts are the read-only mounts of a spec's binds, each without the
// mounts below its source. The engine cannot make a bind nosuid or nodev;
// no-new-privileges and its device cgroup make set-user-ID files and device
// nodes in it powerless all the same.
func bindMounts(binds []sandbox.Bind) []mount.Mount {
	var ms []mount.Mount
	for _, bd := range binds {
		ms = append(ms, mount.Mount{Type: mount.TypeBind, Source: bd.Source, Target: bd.Path, ReadOnly: true,
			BindOptions: &mount.BindOptions{NonRecursive: true}})
	}
	return ms
}

// prepareDirs makes the box's host directories: the code directory
// readable by the container's user, the workspace writable by it (owned by
// it when codeagent is root, else open to all: the box directory above it
// is private to codeagent, and the container reaches it through its mount).
func (b *Backend) prepareDirs(bx *box) error {
	if err := b.mountStaging(bx); err != nil {
		return err
	}
	if err := os.Mkdir(bx.ws, 0o755); err != nil {
		return fmt.Errorf("create staging directory: %w", err)
	}
	if err := os.Mkdir(bx.code, 0o755); err != nil {
		return fmt.Errorf("create code directory: %w", err)
	}
	var err error
	if b.root {
		err = os.Chown(bx.ws, bx.uid, bx.uid)
	} else {
		err = os.Chmod(bx.ws, 0o777)
	}
	if err != nil {
		return fmt.Errorf("prepare staging directory: %w", err)
	}
	return nil
}

// takeUID gives bx its host uid: one of its own from the pool when
// codeagent is root, else Config.HostUID.
func (b *Backend) takeUID(bx *box) error {
	bx.uid = b.cfg.HostUID
	if b.ids != nil {
		id, err := b.ids.Acquire()
		if err != nil {
			return fmt.Errorf("host uid: %w", err)
		}
		bx.uid, bx.ownsUID = id, true
	}
	bx.user = fmt.Sprintf("%d:%d", bx.uid, bx.uid)
	return nil
}

// releaseUID gives bx's uid back to the pool. Only once no process can
// have it: its container never started, or is removed.
func (b *Backend) releaseUID(bx *box) {
	if bx.ownsUID {
		b.ids.Release(bx.uid)
		bx.ownsUID = false
	}
}

func (b *Backend) labels() map[string]string {
	return map[string]string{
		labelManaged: "true",
		labelPool:    b.pool.id,
		labelCreated: strconv.FormatInt(time.Now().Unix(), 10),
		labelOwner:   b.owner,
		labelState:   b.pool.dir,
	}
}

// destroy removes a box's container and directories, and then gives its
// host uid back (kept when the container could not be removed). It is
// synchronous; callers run it in the background.
func (b *Backend) destroy(bx *box) {
	if bx.id != "" && bx.ran && !bx.handedBack && !b.root {
		// A run that failed midway: what the program left must still
		// become removable by codeagent.
		_ = b.kill(bx)
		if _, err := b.handBack(bx, true); err != nil {
			b.log.Warn("docker: open up a staging directory for removal", "id", short(bx.id), "err", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	removed := true
	if bx.id != "" {
		if err := b.remove(ctx, bx.id); err != nil && !isNotFound(err) {
			removed = false
			b.log.Warn("docker: remove container; its host uid stays taken", "id", short(bx.id), "uid", bx.uid, "err", err)
		}
		b.oomKilled(bx.id, false) // forget a late event
	}
	if bx.lifeline != nil {
		_ = bx.lifeline.Close()
	}
	if err := removeTree(bx.dir); err != nil {
		b.log.Warn("docker: remove box directory", "dir", bx.dir, "err", err)
	}
	if removed {
		b.releaseUID(bx)
	}
}

// removeContainer removes a container and its processes.
func (b *Backend) removeContainer(ctx context.Context, id string) error {
	_, err := b.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	return err
}

// kill stops every process of the box's container at once.
func (b *Backend) kill(bx *box) error {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	_, err := b.cli.ContainerKill(ctx, bx.id, client.ContainerKillOptions{Signal: "KILL"})
	if err != nil && (isNotFound(err) || strings.Contains(err.Error(), "is not running")) {
		return nil
	}
	return err
}

// ownerID identifies this process across processes and reboots (see
// procid): host, boot id, pid and its start time.
func ownerID() string { return procid.Self().String() }

// ownerAlive reports whether the process that owner names still runs, or
// may run: owners on another host are assumed alive.
func ownerAlive(owner string) bool {
	o, err := procid.Parse(owner)
	return err == nil && o.Alive()
}

// sweep removes containers with codeagent's label whose owner is gone, and
// their state directories. It returns how many containers it removed.
func (b *Backend) sweep(ctx context.Context) (int, error) {
	list, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelManaged+"=true")})
	if err != nil {
		return 0, fmt.Errorf("list containers: %w", err)
	}
	n := 0
	dirs := map[string]bool{}
	for _, c := range list.Items {
		if ownerAlive(c.Labels[labelOwner]) {
			continue
		}
		if _, err := b.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isNotFound(err) {
			return n, fmt.Errorf("remove container %s: %w", short(c.ID), err)
		}
		n++
		if d := c.Labels[labelState]; d != "" {
			dirs[d] = true
		}
	}
	for d := range dirs {
		// Only directories of the form this package creates.
		if filepath.IsAbs(d) && strings.HasPrefix(filepath.Base(d), statePrefix) {
			_ = removeTree(d)
		}
	}
	b.sweepStateDirs()
	return n, nil
}

// sweepStateDirs removes the state directories in Config.StateDir whose
// owner died, with their staging file systems: those of a process killed
// before it could close its pool, whose containers may be gone already.
func (b *Backend) sweepStateDirs() {
	entries, err := os.ReadDir(b.cfg.StateDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), statePrefix) {
			continue
		}
		dir := filepath.Join(b.cfg.StateDir, e.Name())
		owner, err := readOwner(dir)
		if err != nil || ownerAlive(owner) {
			continue // not ours to judge, or still in use
		}
		if err := removeTree(dir); err != nil {
			b.log.Warn("docker: remove a dead process's state directory", "dir", dir, "err", err)
		}
	}
}

// readOwner reads a state directory's owner file without following a link.
func readOwner(dir string) (string, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer r.Close()
	f, err := r.OpenFile(ownerFile, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, 512)
	n, _ := f.Read(buf)
	return strings.TrimSpace(string(buf[:n])), nil
}

func isNotFound(err error) bool {
	return cerrdefs.IsNotFound(err) || err != nil && strings.Contains(err.Error(), "No such container")
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
