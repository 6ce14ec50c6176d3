package kubernetes

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/codeagent/codeagent/sandbox"
)

func TestZZDebug(t *testing.T) {
	b := newTestBackend(t, testConfig(t, 0))
	defer b.Close()
	bx, err := b.createBox(context.Background(), classOf(sandbox.DefaultLimits()))
	if err != nil {
		t.Fatal(err)
	}
	defer b.destroy(bx)
	err = b.stream(context.Background(), bx.name, []string{"sh", "-c", os.Getenv("DBG")}, strings.NewReader(""), os.Stdout, os.Stdout)
	t.Log(err)
}
