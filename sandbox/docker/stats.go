package docker

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// usage reads the container's CPU time and peak memory. A container serves
// one execution, so its totals are the execution's (its idle `sleep` adds
// next to nothing). On cgroup v2 the engine reports no peak; the current
// usage is the fallback.
func (b *Backend) stats(id string) (cpu time.Duration, peak int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := b.cli.ContainerStats(ctx, id, client.ContainerStatsOptions{})
	if err != nil {
		b.log.Debug("docker: stats", "err", err)
		return 0, 0
	}
	defer r.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&s); err != nil {
		b.log.Debug("docker: stats", "err", err)
		return 0, 0
	}
	return time.Duration(s.CPUStats.CPUUsage.TotalUsage), int64(max(s.MemoryStats.MaxUsage, s.MemoryStats.Usage))
}
