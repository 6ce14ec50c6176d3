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
	"sync"
	"time"

	"github.com/moby/moby/client"
)

// statePrefix starts the name of every pool's state directory.
const statePrefix = "codeagent-docker-"

// maxClasses bounds how many limits classes are kept warm at once.
const maxClasses = 4

// pool keeps Config.Warm started, idle containers per limits class. A
// container is taken for one execution and destroyed afterwards; the pool
// refills in the background. A maintenance loop replaces idle containers
// that stopped and drops classes unused for Config.IdleTimeout.
type pool struct {
	b             *Backend
	id            string
	dir           string // host state directory, removed by close
	passwd, group string // the containers' /etc/passwd and /etc/group

	mu       sync.Mutex
	classes  map[string]*warmClass
	closed   bool
	bg       sync.WaitGroup // creations and removals under way
	stop     chan struct{}
	loopDone chan struct{}
	oom      *oomWatch
}

type warmClass struct {
	class    class
	idle     []*box
	starting int
	lastUse  time.Time
	failures int // consecutive failed creations; refills pause after 3
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
	p := &pool{b: b, id: id, dir: dir, classes: map[string]*warmClass{}, stop: make(chan struct{}), loopDone: make(chan struct{}),
		passwd: filepath.Join(dir, "passwd"), group: filepath.Join(dir, "group")}
	if err := writeAccounts(p.passwd, p.group, b.cfg.HostUID); err != nil {
		_ = removeTree(dir)
		return nil, err
	}
	p.oom = b.watchOOM(id)
	go p.loop()
	return p, nil
}

// writeAccounts writes the containers' /etc/passwd and /etc/group, which
// name uid (the image's name uid 1000 instead): tools that look the user
// up (whoami, getpass, git) need a name and a home.
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
func (p *pool) prime(c class) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.warmLocked(c)
	p.refillLocked(c.key())
}

func (p *pool) warmLocked(c class) *warmClass {
	k := c.key()
	wc := p.classes[k]
	if wc == nil {
		if len(p.classes) >= maxClasses {
			p.evictOldestLocked()
		}
		wc = &warmClass{class: c}
		p.classes[k] = wc
	}
	wc.lastUse = time.Now()
	return wc
}

func (p *pool) evictOldestLocked() {
	var oldest string
	for k, wc := range p.classes {
		if oldest == "" || wc.lastUse.Before(p.classes[oldest].lastUse) {
			oldest = k
		}
	}
	p.dropLocked(oldest)
}

func (p *pool) dropLocked(k string) {
	wc := p.classes[k]
	if wc == nil {
		return
	}
	for _, bx := range wc.idle {
		p.destroyLater(bx)
	}
	delete(p.classes, k)
}

// take returns a started container of class c: an idle one when there is
// one, else one created now. release refills the class.
func (p *pool) take(ctx context.Context, c class) (*box, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("backend closed")
	}
	var bx *box
	if p.b.cfg.Warm > 0 {
		wc := p.warmLocked(c)
		if n := len(wc.idle); n > 0 {
			bx, wc.idle = wc.idle[0], wc.idle[1:]
		}
		wc.failures = 0
	}
	p.mu.Unlock()
	if bx != nil {
		return bx, nil
	}
	return p.b.createBox(ctx, c)
}

// refillLocked starts creations until the class has Warm containers idle
// or starting.
func (p *pool) refillLocked(k string) {
	wc := p.classes[k]
	if wc == nil || p.closed || wc.failures >= 3 {
		return
	}
	for len(wc.idle)+wc.starting < p.b.cfg.Warm {
		wc.starting++
		p.bg.Add(1)
		go p.fill(k, wc)
	}
}

func (p *pool) fill(k string, wc *warmClass) {
	defer p.bg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	bx, err := p.b.createBox(ctx, wc.class)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	wc.starting--
	if err != nil {
		wc.failures++
		p.b.log.Warn("docker: start a warm container", "err", err)
		return
	}
	if p.closed || p.classes[k] != wc {
		p.destroyLater(bx)
		return
	}
	wc.failures = 0
	wc.idle = append(wc.idle, bx)
}

// release destroys a used container in the background and refills its
// class; both wait until the execution is over, so as not to compete with
// it for the CPU.
func (p *pool) release(bx *box) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.destroyLater(bx)
	if p.b.cfg.Warm > 0 {
		p.refillLocked(bx.class.key())
	}
}

// destroyLater removes bx in the background; Close waits for it.
func (p *pool) destroyLater(bx *box) {
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		p.b.destroy(bx)
	}()
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
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, wc := range p.classes {
		if time.Since(wc.lastUse) > p.b.cfg.IdleTimeout {
			p.dropLocked(k)
			continue
		}
		keep := wc.idle[:0]
		for _, bx := range wc.idle {
			if running[bx.id] {
				keep = append(keep, bx)
				continue
			}
			p.b.log.Warn("docker: replacing a warm container that stopped", "id", short(bx.id))
			p.destroyLater(bx)
		}
		wc.idle = keep
		wc.failures = 0
		p.refillLocked(k)
	}
}

// close destroys every container of the pool, waits for the background
// work and removes the state directory.
func (p *pool) close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for k := range p.classes {
		p.dropLocked(k)
	}
	p.mu.Unlock()
	close(p.stop)
	<-p.loopDone
	p.bg.Wait()
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
func (p *pool) wait() { p.bg.Wait() }
