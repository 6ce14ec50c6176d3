package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/moby/moby/client"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/warmpool"
)

// statePrefix starts the name of every pool's state directory.
const statePrefix = "codeagent-docker-"

// ownerFile, in a pool's state directory, names the process that owns
// it (procid): a later process removes the directories, and unmounts
// the staging file systems, of owners that died (see sweepStateDirs).
const ownerFile = "owner"

// maxClasses bounds how many limits classes are kept warm at once.
const maxClasses = 4

// pool keeps Config.Warm started, idle containers per limits class
// (package warmpool). A container is taken for one execution and destroyed
// afterwards; the pool refills in the background. A maintenance loop
// replaces idle containers that stopped and drops classes unused for
// Config.IdleTimeout.
type pool struct {
	b   *Backend
	id  string
	dir string // host state directory, removed by close

	wp       *warmpool.Pool[class, *box]
	stop     chan struct{}
	loopDone chan struct{}
	oom      *oomWatch
}

func newPool(b *Backend) (*pool, error) {
	var r [6]byte
	_, _ = rand.Read(r[:])
	id := hex.EncodeToString(r[:])
	if err := os.MkdirAll(b.cfg.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", b.cfg.StateDir, err)
	}
	dir, err := os.MkdirTemp(b.cfg.StateDir, statePrefix+id+"-")
	if err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	p := &pool{b: b, id: id, dir: dir, stop: make(chan struct{}), loopDone: make(chan struct{})}
	p.wp = warmpool.New(warmpool.Config[class, *box]{
		Warm: b.cfg.Warm, MaxClasses: maxClasses, Key: class.key,
		// The pool's containers have no binds (see take).
		Create:        func(ctx context.Context, c class) (*box, error) { return b.createBox(ctx, c, nil) },
		CreateTimeout: apiTimeout, Destroy: b.destroy,
		CreateFailed: func(err error) { b.log.Warn("docker: start a warm container", "err", err) },
	})
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(b.owner), 0o600); err != nil {
		_ = removeTree(dir)
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	p.oom = b.watchOOM(id)
	go p.loop()
	return p, nil
}

// writeAccounts writes a container's /etc/passwd and /etc/group, which
// name its uid (the image's name uid 1000 instead): tools that look the
// user up (whoami, getpass, git) need a name and a home.
func writeAccounts(passwd, group string, uid int) error {
	u := strconv.Itoa(uid)
	files := map[string]string{
		passwd: "root:x:0:0:root:/root:/bin/sh\nsandbox:x:" + u + ":" + u + ":sandbox:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		group:  "root:x:0:\nsandbox:x:" + u + ":\nnogroup:x:65534:\n",
	}
	for f, content := range files {
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", filepath.Base(f), err)
		}
	}
	return nil
}

// prime makes c a warm class and starts filling it.
func (p *pool) prime(c class) { p.wp.Prime(c) }

// take returns a started container of class c: an idle one when there is
// one, else one created now. release refills the class. A spec with binds
// always gets a container created for it with those mounts, which never
// enters the pool: no other spec can see them (the cost is a cold start).
func (p *pool) take(ctx context.Context, c class, binds []sandbox.Bind) (*box, error) {
	if len(binds) > 0 {
		return p.b.createBox(ctx, c, binds)
	}
	bx, ok, err := p.wp.Take(c, nil, false)
	if err != nil || ok {
		return bx, err
	}
	return p.b.createBox(ctx, c, nil)
}

// release destroys a used container in the background and refills its
// class; both wait until the execution is over, so as not to compete with
// it for the CPU.
func (p *pool) release(bx *box) {
	p.wp.Destroy(bx)
	if len(bx.binds) == 0 {
		p.wp.Refill(bx.class)
	}
}

// loop replaces crashed idle containers and drops unused classes.
func (p *pool) loop() {
	defer close(p.loopDone)
	t := time.NewTicker(p.b.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.check()
		}
	}
}

// check lists this pool's running containers and replaces idle ones that
// are not among them (crashed, killed or removed from outside).
func (p *pool) check() {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	list, err := p.b.cli.ContainerList(ctx, client.ContainerListOptions{
		Filters: make(client.Filters).Add("label", labelPool+"="+p.id).Add("status", "running"),
	})
	if err != nil {
		p.b.log.Warn("docker: check warm containers", "err", err)
		return
	}
	running := map[string]bool{}
	for _, c := range list.Items {
		running[c.ID] = true
	}
	p.wp.Check(p.b.cfg.IdleTimeout, func(bx *box) bool {
		if !running[bx.id] {
			p.b.log.Warn("docker: replacing a warm container that stopped", "id", short(bx.id))
		}
		return running[bx.id]
	})
}

// close destroys every container of the pool, waits for the background
// work and removes the state directory.
func (p *pool) close() error {
	select {
	case <-p.stop:
		return nil
	default:
	}
	close(p.stop)
	<-p.loopDone
	if !p.wp.Close() {
		return nil
	}
	p.oom.close()
	// Anything still labelled with this pool (a container of a Run that
	// has not returned, or one whose removal failed) goes too.
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	var errs []error
	list, err := p.b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelPool+"="+p.id)})
	if err != nil {
		errs = append(errs, fmt.Errorf("list containers: %w", err))
	}
	for _, c := range list.Items {
		if _, err := p.b.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", short(c.ID), err))
		}
	}
	if err := removeTree(p.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", p.dir, err))
	}
	return errors.Join(errs...)
}

// wait blocks until background creations and removals are done (tests and
// benchmarks use it to keep them out of measurements).
func (p *pool) wait() { p.wp.Wait() }

// PoolStats implements sandbox.Pools: the containers started ahead.
func (b *Backend) PoolStats() []sandbox.PoolStats {
	if b.pool == nil || b.cfg.Warm <= 0 {
		return nil
	}
	return []sandbox.PoolStats{b.pool.wp.Stats()}
}
