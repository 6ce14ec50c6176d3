package docker

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/sandboxtest"
)

// engineOrSkip skips the test when no engine answers, unless CI is set:
// CI installs and starts one, so there its absence is a failure.
func engineOrSkip(t testing.TB) {
	t.Helper()
	cli, err := Connect("")
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = Ping(ctx, cli)
		if err == nil {
			_, err = cli.ImageInspect(ctx, DefaultImage)
			if err != nil {
				err = fmt.Errorf("image %s: %w (build it with images/build-offline.sh)", DefaultImage, err)
			}
		}
		cancel()
		cli.Close()
	}
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set but the Docker backend cannot run (scripts/start-dockerd.sh, images/build-offline.sh): %v", err)
	}
	t.Skipf("no Docker engine reachable: %v (start one with scripts/start-dockerd.sh and build the image with images/build-offline.sh; in CI this fails instead)", err)
}

func newTestBackend(t testing.TB, cfg Config) *Backend {
	t.Helper()
	engineOrSkip(t)
	if cfg.Image == "" {
		cfg.Image = os.Getenv("CODEAGENT_TEST_IMAGE") // another build of images/build-offline.sh
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConformance runs the shared suite cold (a container created per
// execution) and with a warm pool, then checks that Close leaves nothing.
func TestConformance(t *testing.T) {
	for _, warm := range []int{0, 2} {
		t.Run(fmt.Sprintf("Warm%d", warm), func(t *testing.T) {
			b := newTestBackend(t, Config{Warm: warm})
			// Run by an ordinary user, every container runs as one uid.
			sandboxtest.RunWith(t, b, sandboxtest.Features{CopyBack: true, SharedHostUID: !b.root})
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			assertNothingLeft(t, b.pool.id, b.pool.dir)
		})
	}
}

// TestNoLeftovers runs 200 pooled executions, closes the backend and checks
// that no container, volume or network of its pool remains.
func TestNoLeftovers(t *testing.T) {
	if testing.Short() {
		t.Skip("200 executions; skipped with -short")
	}
	b := newTestBackend(t, Config{Warm: 2})
	ws := t.TempDir()
	for i := 0; i < 200; i++ {
		res, err := b.Run(context.Background(), sandbox.Spec{Command: []string{"python3", "-c", "open('n.txt', 'w').write(str(1))"}, Workspace: ws})
		if err != nil || res.Status != sandbox.StatusOK {
			t.Fatalf("run %d: %v %s %s", i, err, res.Status, res.Stderr)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Its own pool only: other packages' tests may run containers now.
	assertNothingLeft(t, b.pool.id, b.pool.dir)
}

// assertNothingLeft lists containers, volumes and networks with the
// managed label (of one pool when pool is set) and the state directory.
func assertNothingLeft(t *testing.T, pool, dir string) {
	t.Helper()
	cli, err := Connect("")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := make(client.Filters).Add("label", labelManaged+"=true")
	if pool != "" {
		f = f.Add("label", labelPool+"="+pool)
	}
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Items) != 0 || len(vs.Items) != 0 || len(ns.Items) != 0 {
		t.Errorf("left behind: %d containers, %d volumes, %d networks", len(cs.Items), len(vs.Items), len(ns.Items))
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state directory %s left behind", dir)
	}
}
