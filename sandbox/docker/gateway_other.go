//go:build !linux

package docker

import (
	"context"
	"errors"

	"github.com/codeagent/codeagent/sandbox"
)

// openGateway: the egress proxy's listener is opened in the container's
// network namespace, which only Linux has.
func (b *Backend) openGateway(ctx context.Context, bx *box, gw sandbox.Gateway) error {
	if gw == nil {
		return nil
	}
	return errors.New("network egress needs Linux")
}
