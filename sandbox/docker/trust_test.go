package docker

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The backend's trust store is the image's: as many authorities as
// Python finds in the image run by the engine directly (outside
// codeagent: a program of ours, not an attack).
func TestTrustStoreIsTheImages(t *testing.T) {
	b := newTestBackend(t, Config{})
	defer b.Close()
	ts, err := b.TrustStore(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("docker", "run", "--rm", "--network", "none", b.cfg.Image, "python3", "-c",
		"import ssl; print(ssl.create_default_context().cert_store_stats()['x509_ca'])").Output()
	if err != nil {
		t.Skipf("the docker command cannot run the image: %v", err)
	}
	image, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	if image == 0 || ts.Authorities != image || !strings.Contains(ts.Source, b.cfg.Image) {
		t.Fatalf("the backend's store %q has %d authorities; the image's Python trusts %d", ts.Source, ts.Authorities, image)
	}
}
