package eval

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Progress draws a one-line progress bar (for a terminal) as records
// arrive: "[#########-----------] 82/164 · pass 80 (97.6%) · 41s · eta 41s".
type Progress struct {
	mu      sync.Mutex
	w       io.Writer
	total   int
	done    int
	passed  int
	errors  int
	started time.Time
	now     func() time.Time
}

// NewProgress returns a bar for total tasks, drawn on w.
func NewProgress(w io.Writer, total int) *Progress {
	p := &Progress{w: w, total: total, started: time.Now(), now: time.Now}
	p.draw()
	return p
}

// Record counts a finished task and redraws the bar.
func (p *Progress) Record(r Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if r.Passed {
		p.passed++
	}
	if r.Error != "" {
		p.errors++
	}
	p.draw()
}

// Finish ends the bar's line.
func (p *Progress) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	io.WriteString(p.w, "\n")
}

const barWidth = 24

func (p *Progress) draw() {
	fill := 0
	if p.total > 0 {
		fill = barWidth * p.done / p.total
	}
	elapsed := p.now().Sub(p.started)
	var b strings.Builder
	fmt.Fprintf(&b, "\r\x1b[K[%s%s] %d/%d", strings.Repeat("#", fill), strings.Repeat("-", barWidth-fill), p.done, p.total)
	if p.done > 0 {
		fmt.Fprintf(&b, " · pass %d (%.1f%%)", p.passed, 100*float64(p.passed)/float64(p.done))
	}
	if p.errors > 0 {
		fmt.Fprintf(&b, " · %d error(s)", p.errors)
	}
	fmt.Fprintf(&b, " · %s", elapsed.Round(time.Second))
	if p.done > 0 && p.done < p.total {
		eta := time.Duration(float64(elapsed) / float64(p.done) * float64(p.total-p.done))
		fmt.Fprintf(&b, " · eta %s", eta.Round(time.Second))
	}
	io.WriteString(p.w, b.String())
}
