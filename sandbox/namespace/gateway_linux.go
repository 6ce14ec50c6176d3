//go:build linux && (amd64 || arm64)

package namespace

import (
	"fmt"

	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/sandbox/internal/netns"
)

// openGateway gives an execution with a network its egress proxy: a
// listener on 127.0.0.1 of the sandbox's own network namespace, opened
// while the sandbox waits on --block-fd, before the program starts. The
// sandbox keeps no route and no interface but its loopback.
func openGateway(pid int, gw sandbox.Gateway) error {
	if gw == nil {
		return nil
	}
	l, err := netns.Listen(pid, gw.Port())
	if err != nil {
		return fmt.Errorf("the egress proxy's listener: %w", err)
	}
	go gw.Serve(l)
	return nil
}
