//go:build linux

package docker

import (
	"encoding/json"
	"fmt"
)

// SeccompProfile is the containers' seccomp profile as JSON in the format
// engines and the kubelet read (moby's), for installing it on a
// Kubernetes node as a Localhost profile (scripts/kube-local.sh does).
func SeccompProfile() ([]byte, error) {
	p, err := profile()
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(p, "", " ")
	if err != nil {
		return nil, fmt.Errorf("seccomp profile: %w", err)
	}
	return b, nil
}
