//go:build linux && (amd64 || arm64)

package namespace

import (
	"sort"
	"testing"
)

// TestIdmapLines: the owner maps to the sandbox's uid, every other id but
// that uid to itself, and no two lines overlap on either side (the kernel
// refuses such a map).
func TestIdmapLines(t *testing.T) {
	for _, c := range [][2]int{{0, 2000000000}, {1000, 2000000001}, {2000000000, 2000000000}, {2000000005, 2000000001}} {
		owner, host := c[0], c[1]
		lines := idmapLines(owner, host)
		if lines[0].ContainerID != owner || lines[0].HostID != host || lines[0].Size != 1 {
			t.Errorf("%v: first line %+v, want the owner to the host id", c, lines[0])
		}
		for _, side := range []func(i int) (int, int){
			func(i int) (int, int) { return lines[i].ContainerID, lines[i].Size },
			func(i int) (int, int) { return lines[i].HostID, lines[i].Size },
		} {
			idx := make([]int, len(lines))
			for i := range idx {
				idx[i] = i
			}
			sort.Slice(idx, func(a, b int) bool { s1, _ := side(idx[a]); s2, _ := side(idx[b]); return s1 < s2 })
			next, total := 0, 0
			for _, i := range idx {
				start, size := side(i)
				if start < next {
					t.Errorf("%v: lines overlap at %d: %+v", c, start, lines)
				}
				next, total = start+size, total+size
			}
			if want := maxID - 1; owner != host && total != want {
				t.Errorf("%v: %d ids mapped, want all but one (%d): %+v", c, total, want, lines)
			}
		}
		for _, l := range lines[1:] {
			if l.ContainerID != l.HostID {
				t.Errorf("%v: %+v maps an id to another", c, l)
			}
		}
	}
}
