package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Socket buffers are kernel memory that a program fills at will (a
// loopback TCP connection nobody reads holds megabytes). cgroup v2 charges
// them to memory.max with everything else. cgroup v1 charges them to a
// counter of their own, memory.kmem.tcp, and only once that counter has a
// limit: without one a sandbox held 258 MiB of TCP buffers under a 64 MiB
// limit. On v1 every container therefore gets a socket memory limit of a
// quarter of its memory limit, so that the sandbox holds at most 1.25 times
// Limits.Memory in all; sends then block or fail instead of growing. The
// engine is asked for it (HostConfig.KernelMemoryTCP), but runc 1.1 and
// later ignore that field, so the backend checks the container's cgroup
// and, as root, writes the limit there itself before the program starts.

// tcpLimit is the v1 socket memory limit for a memory limit, in whole pages.
func tcpLimit(memory int64) int64 { return max(memory/4, 1<<20) &^ 4095 }

// socketMemoryCharged asks the engine which cgroup version it uses and
// returns whether containers need their own socket memory limit (v1). On
// v2 it checks that the kernel was not booted with cgroup.memory=nosocket,
// which turns that charging off.
func socketMemoryCharged(ctx context.Context, cli *client.Client, host string) (v1 bool, err error) {
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return false, fmt.Errorf("engine info: %w", err)
	}
	if info.Info.CgroupVersion != "2" {
		return true, nil
	}
	if Local(host) {
		if cmd, err := os.ReadFile("/proc/cmdline"); err == nil && nosocket(string(cmd)) {
			return false, errors.New("the kernel was booted with cgroup.memory=nosocket, so socket buffers would escape the memory limit")
		}
	}
	return false, nil
}

func nosocket(cmdline string) bool {
	for _, f := range strings.Fields(cmdline) {
		if v, ok := strings.CutPrefix(f, "cgroup.memory="); ok && strings.Contains(v, "nosocket") {
			return true
		}
	}
	return false
}

// createContainer is ContainerCreate with HostConfig.KernelMemoryTCP set to
// tcp when it is positive: engines with API 1.41 apply it on cgroup v1, but
// the Go client's types no longer carry the field, so the request is made
// here, over the client's own connection to the engine.
func (b *Backend) createContainer(ctx context.Context, cfg *container.Config, hc *container.HostConfig, tcp int64) (string, error) {
	if tcp <= 0 {
		resp, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: hc})
		return resp.ID, err
	}
	type hostConfigV1 struct {
		*container.HostConfig
		KernelMemoryTCP int64
	}
	body, err := json.Marshal(struct {
		*container.Config
		HostConfig hostConfigV1
	}{cfg, hostConfigV1{hc, tcp}})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://docker/v"+b.cli.ClientVersion()+"/containers/create", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	dial := b.cli.Dialer()
	hcli := &http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		DisableKeepAlives: true,
	}}
	resp, err := hcli.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var out struct {
		ID      string `json:"Id"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(data, &out)
	if resp.StatusCode != http.StatusCreated || out.ID == "" {
		return "", fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(out.Message))
	}
	return out.ID, nil
}

// errNoTCPLimit is wrapped by checkTCPLimit's error when the limit could
// not be set.
var errNoTCPLimit = errors.New("cgroup v1: the container runtime ignores the socket memory limit and codeagent cannot set it (run it as root, use a cgroup v2 host, or accept weak isolation)")

// checkTCPLimit makes sure, on cgroup v1, that the container's socket
// memory limit is want, writing it when the runtime did not (which needs
// root). The container has only its idle first process: no socket exists
// that the limit would miss.
func checkTCPLimit(cg cgroupFiles, want int64) error {
	if cg.memory == "" || cg.v2 {
		return nil
	}
	file := filepath.Join(cg.memory, "memory.kmem.tcp.limit_in_bytes")
	if readInt(file) == want {
		return nil
	}
	if err := os.WriteFile(file, []byte(strconv.FormatInt(want, 10)), 0); err != nil {
		return fmt.Errorf("%w: %w", errNoTCPLimit, err)
	}
	if got := readInt(file); got != want {
		return fmt.Errorf("socket memory limit is %d, want %d", got, want)
	}
	return nil
}
