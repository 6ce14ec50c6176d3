package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/codeagent/codeagent/procid"
)

// Audit record kinds the store itself understands: every execution is
// recorded before it starts and after it ends; a run whose process died is
// closed by an interrupted record of the process that found it; a run that
// could not write its records closes with audit_failed when it still can.
const (
	KindExecStart   = "exec_start"   // data: {"exec": k, "owner": procid owner, ...}
	KindExecEnd     = "exec_end"     // data: {"exec": k, "status": ..., ...}
	KindInterrupted = "interrupted"  // data: {"turn": id, "reason": ...}
	KindAuditFailed = "audit_failed" // data: {"error": ..., "first_lost": n}
)

// Gap is a place where the audit log is not the whole story of a run.
// Explained gaps are executions whose end is unknown because their process
// died (the log says so in an interrupted record): reported, not a loss.
type Gap struct {
	Session   string `json:"session"`
	RunID     string `json:"run_id"`
	Seq       int64  `json:"seq"` // the record where it shows
	Reason    string `json:"reason"`
	Explained bool   `json:"explained"`
}

func (g Gap) String() string {
	return fmt.Sprintf("run %s (session %q), record %d: %s", shortRun(g.RunID), g.Session, g.Seq, g.Reason)
}

func shortRun(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

type execMark struct {
	Exec  int    `json:"exec"`
	Owner string `json:"owner"`
}

type runRecords struct {
	session     string
	nums        []int64
	firstSeq    map[int64]int64 // run_seq -> seq
	starts      map[int]Record
	ends        map[int]bool
	interrupted bool
	closed      bool // a done or audit_failed record: nothing is under way
	failed      []Record
}

// AuditGaps checks that every run's records are all there: their numbers
// run from 1 without a hole, and every execution that started has an end,
// unless its process still runs (it is under way) or died (an interrupted
// record says so). It does not check the hash chain (VerifyAudit does).
func (s *Store) AuditGaps(ctx context.Context) ([]Gap, error) {
	recs, err := s.AuditLog(ctx, "")
	if err != nil {
		return nil, err
	}
	runs := map[string]*runRecords{}
	var order []string
	for _, r := range recs {
		if r.RunID == "" {
			continue
		}
		rr := runs[r.RunID]
		if rr == nil {
			rr = &runRecords{session: r.Session, firstSeq: map[int64]int64{}, starts: map[int]Record{}, ends: map[int]bool{}}
			runs[r.RunID] = rr
			order = append(order, r.RunID)
		}
		if r.RunSeq > 0 {
			rr.nums = append(rr.nums, r.RunSeq)
			rr.firstSeq[r.RunSeq] = r.Seq
		}
		var m execMark
		switch r.Kind {
		case KindExecStart:
			if json.Unmarshal(r.Data, &m) == nil {
				rr.starts[m.Exec] = r
			}
		case KindExecEnd:
			if json.Unmarshal(r.Data, &m) == nil {
				rr.ends[m.Exec] = true
			}
		case KindInterrupted:
			rr.interrupted = true
		case KindAuditFailed:
			rr.failed = append(rr.failed, r)
			rr.closed = true
		case "done":
			rr.closed = true
		}
	}
	var gaps []Gap
	for _, id := range order {
		gaps = append(gaps, runs[id].gaps(id)...)
	}
	return gaps, nil
}

func (rr *runRecords) gaps(id string) []Gap {
	var out []Gap
	gap := func(seq int64, explained bool, format string, a ...any) {
		out = append(out, Gap{Session: rr.session, RunID: id, Seq: seq, Reason: fmt.Sprintf(format, a...), Explained: explained})
	}
	sort.Slice(rr.nums, func(i, j int) bool { return rr.nums[i] < rr.nums[j] })
	want := int64(1)
	for _, n := range rr.nums {
		switch {
		case n == want:
			want++
		case n > want:
			if n == want+1 {
				gap(rr.firstSeq[n], false, "record %d of the run is missing (it could not be written, or was removed)", want)
			} else {
				gap(rr.firstSeq[n], false, "records %d to %d of the run are missing (they could not be written, or were removed)", want, n-1)
			}
			want = n + 1
		}
	}
	for _, f := range rr.failed {
		var d struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(f.Data, &d)
		gap(f.Seq, false, "the run stopped because its audit records could not be written: %s", d.Error)
	}
	execs := make([]int, 0, len(rr.starts))
	for k := range rr.starts {
		execs = append(execs, k)
	}
	sort.Ints(execs)
	for _, k := range execs {
		if rr.ends[k] {
			continue
		}
		start := rr.starts[k]
		var m execMark
		_ = json.Unmarshal(start.Data, &m)
		owner, perr := procid.Parse(m.Owner)
		switch {
		case rr.interrupted:
			gap(start.Seq, true, "execution %d has no end record: the run was interrupted when its process died", k)
		case rr.closed:
			gap(start.Seq, false, "execution %d has no end record, though the run ended", k)
		case perr == nil && owner.Alive():
			// Under way.
		case perr == nil:
			gap(start.Seq, false, "execution %d has no end record, and its process (%s) is gone", k, owner.Describe())
		default:
			gap(start.Seq, false, "execution %d has no end record", k)
		}
	}
	return out
}
