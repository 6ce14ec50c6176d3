package docker

import (
	"encoding/json"
	"fmt"

	"github.com/moby/profiles/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// SeccompProfile is the containers' seccomp profile as a kubelet's
// Localhost profile (scripts/kube-local.sh installs it): in the OCI
// runtime spec's format, which containerd and CRI-O read as it is, so the
// conditions an engine would evaluate are resolved here, for a container
// without capabilities on this machine's kernel (rules granted with a
// capability are left out).
func SeccompProfile() ([]byte, error) {
	p, err := profile()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("seccomp profile: %w", err)
	}
	noCaps := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}}
	resolved, err := seccomp.LoadProfile(string(b), noCaps)
	if err != nil {
		return nil, fmt.Errorf("seccomp profile: %w", err)
	}
	out, err := json.MarshalIndent(resolved, "", " ")
	if err != nil {
		return nil, fmt.Errorf("seccomp profile: %w", err)
	}
	return out, nil
}
