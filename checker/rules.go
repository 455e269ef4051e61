package checker

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sked-dev/sked/schedule"
)

// maxSlotWalk bounds how many schedule slots checkSlots walks per job.
const maxSlotWalk = 1_000_000

// finalStates are where a one-off job ends.
var finalStates = []string{"done", "dead", "cancelled"}

// workerOutcomes are the outcomes only the holder of a lease writes; the
// reaper writes lease_expired and the store writes missed.
var workerOutcomes = []string{"succeeded", "failed", "timed_out", "cancelled", "released"}

func checkIntegrity(e *evidence) []Violation {
	if len(e.integrity) == 0 {
		return nil
	}
	return []Violation{{Rule: RuleIntegrity, JobID: "-", Detail: "the database is not consistent", Evidence: e.integrity}}
}

func checkLost(e *evidence) []Violation {
	var out []Violation
	byKey := map[string]line[ClientRecord]{}
	for _, c := range e.client {
		if c.rec.Op != OpEnqueue {
			continue
		}
		if k := c.rec.IdempotencyKey; k != "" {
			if first, ok := byKey[k]; ok && first.rec.JobID != c.rec.JobID {
				out = append(out, Violation{Rule: RuleDuplicate, JobID: c.rec.JobID,
					Detail:   fmt.Sprintf("idempotency key %q was acknowledged as jobs %s and %s", k, first.rec.JobID, c.rec.JobID),
					Evidence: []string{first.at, c.at}})
			} else if !ok {
				byKey[k] = c
			}
		}
		j := e.jobs[c.rec.JobID]
		switch {
		case j == nil:
			out = append(out, Violation{Rule: RuleLost, JobID: c.rec.JobID,
				Detail: "acknowledged enqueue is not in the database", Evidence: []string{c.at}})
		case e.in.Finished && j.schedule == "" && !slices.Contains(finalStates, j.state):
			out = append(out, Violation{Rule: RuleLost, JobID: c.rec.JobID,
				Detail:   fmt.Sprintf("acknowledged one-off job is still %s after the run finished", j.state),
				Evidence: []string{c.at, j.String()}})
		}
	}
	return out
}

func checkCancels(e *evidence) []Violation {
	var out []Violation
	for _, c := range e.client {
		if c.rec.Op != OpCancel {
			continue
		}
		j := e.jobs[c.rec.JobID]
		if j == nil {
			continue // checkLost or checkUnasked says why
		}
		switch c.rec.Status {
		case 204:
			if j.state != "cancelled" {
				out = append(out, Violation{Rule: RuleCancel, JobID: j.id,
					Detail:   fmt.Sprintf("cancel answered 204 but the job is %s", j.state),
					Evidence: []string{c.at, j.String()}})
			}
		case 409:
			started := slices.ContainsFunc(e.runs[j.id], func(r runRow) bool { return r.started != nil })
			if !started {
				out = append(out, Violation{Rule: RuleCancel, JobID: j.id,
					Detail:   "cancel answered 409 but no run of the job ever started",
					Evidence: []string{c.at, j.String()}})
			}
		}
	}
	return out
}

func checkUnasked(e *evidence) []Violation {
	acked, sent := map[string]bool{}, map[string]bool{}
	for _, c := range e.client {
		switch c.rec.Op {
		case OpEnqueue:
			acked[c.rec.JobID] = true
		case OpEnqueueUnacked:
			sent[c.rec.IdempotencyKey] = true
		}
	}
	asked := func(id string) bool {
		if acked[id] {
			return true
		}
		j := e.jobs[id]
		return j != nil && ((j.idemKey != "" && sent[j.idemKey]) || slices.Contains(e.in.AllowTypes, j.typ))
	}
	var out []Violation
	seen := map[string]bool{}
	report := func(id, where string) {
		if seen[id] || asked(id) {
			return
		}
		seen[id] = true
		v := Violation{Rule: RuleUnasked, JobID: id, Detail: "no enqueue asked for this job", Evidence: []string{where}}
		if j := e.jobs[id]; j != nil && where != j.String() {
			v.Evidence = append(v.Evidence, j.String())
		}
		out = append(out, v)
	}
	for _, id := range sortedKeys(e.jobs) {
		report(id, e.jobs[id].String())
	}
	for _, x := range e.execs {
		report(x.jobID, x.evidence[0])
	}
	for _, l := range e.server {
		report(l.rec.JobID, l.at)
	}
	return out
}

// liveEnd is when execution x stopped being live: its end, or, when its
// process died, the end of its lease as the database knows it. ok is false
// when the database has no run of x's generation.
func (e *evidence) liveEnd(x *execution) (end int64, evidence string, ok bool) {
	if x.end != 0 {
		return x.end, "", true
	}
	for _, r := range e.runs[x.jobID] {
		if r.generation != x.generation {
			continue
		}
		if r.fini != nil {
			return r.fini.UnixNano(), r.String(), true
		}
		if j := e.jobs[x.jobID]; j != nil && j.leaseGeneration == x.generation && j.leaseUntil != nil {
			return j.leaseUntil.UnixNano(), j.String(), true
		}
		return math.MaxInt64, r.String(), true
	}
	return math.MaxInt64, "", false
}

func checkOverlap(e *evidence) []Violation {
	out := slices.Clone(e.dupExecs)
	var prev *execution // the execution of the same job live the longest so far
	var prevEnd int64
	var prevWhy string
	for _, x := range e.execs {
		end, why, ok := e.liveEnd(x)
		if !ok {
			out = append(out, Violation{Rule: RuleGeneration, JobID: x.jobID,
				Detail:   fmt.Sprintf("generation %d was executed but the database has no run of it: its claim was lost", x.generation),
				Evidence: x.evidence})
		}
		if prev != nil && prev.jobID == x.jobID && x.start < prevEnd {
			ev := append(slices.Clone(prev.evidence), x.evidence...)
			if prevWhy != "" {
				ev = append(ev, prevWhy)
			}
			out = append(out, Violation{Rule: RuleOverlap, JobID: x.jobID,
				Detail: fmt.Sprintf("generation %d started at %s while generation %d was live until %s",
					x.generation, fmtNS(x.start), prev.generation, fmtNS(prevEnd)),
				Evidence: ev})
		}
		if prev == nil || prev.jobID != x.jobID || end > prevEnd {
			prev, prevEnd, prevWhy = x, end, why
		}
	}
	return out
}

// checkEarlyStarts holds every execution to its run's due time.
func checkEarlyStarts(e *evidence) []Violation {
	var out []Violation
	for _, x := range e.execs {
		for _, r := range e.runs[x.jobID] {
			if r.generation != x.generation || r.slot == nil || x.start == 0 {
				continue
			}
			if due := r.slot.UnixNano(); x.start < due-int64(time.Millisecond) {
				out = append(out, Violation{Rule: RuleEarlyStart, JobID: x.jobID,
					Detail: fmt.Sprintf("generation %d started at %s, %s before it was due at %s",
						x.generation, fmtNS(x.start), time.Duration(due-x.start), fmtT(r.slot)),
					Evidence: append(slices.Clone(x.evidence), r.String())})
			}
		}
	}
	return out
}

func fmtNS(ns int64) string {
	if ns == math.MaxInt64 {
		return "never ended"
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// checkRuns applies the rules read from the runs table alone: generations
// issued once, each run claimed after the previous lease ended, no write
// from a replaced lease, and a one-off job's success being its last run.
func checkRuns(e *evidence) []Violation {
	var out []Violation
	for _, id := range sortedKeys(e.runs) {
		var runs []runRow
		for _, r := range e.runs[id] {
			if r.generation > 0 { // missed rows have generation 0
				runs = append(runs, r)
			}
		}
		j := e.jobs[id]
		if j != nil && len(runs) > 0 && runs[len(runs)-1].generation > j.leaseGeneration {
			out = append(out, Violation{Rule: RuleGeneration, JobID: id,
				Detail:   fmt.Sprintf("the job's lease_generation %d is below its run's %d: a generation will be issued twice", j.leaseGeneration, runs[len(runs)-1].generation),
				Evidence: []string{j.String(), runs[len(runs)-1].String()}})
		}
		for i := 1; i < len(runs); i++ {
			a, b := runs[i-1], runs[i]
			ev := []string{a.String(), b.String()}
			switch {
			case a.generation == b.generation:
				out = append(out, Violation{Rule: RuleGeneration, JobID: id,
					Detail: fmt.Sprintf("generation %d was issued twice", a.generation), Evidence: ev})
			case a.fini == nil:
				out = append(out, Violation{Rule: RuleEarlyClaim, JobID: id,
					Detail:   fmt.Sprintf("generation %d was claimed while generation %d was never closed", b.generation, a.generation),
					Evidence: ev})
			case b.started != nil && b.started.Before(*a.fini) && slices.Contains(workerOutcomes, a.outcome):
				out = append(out, Violation{Rule: RuleStaleWrite, JobID: id,
					Detail: fmt.Sprintf("generation %d wrote %s at %s, after generation %d had taken the job at %s",
						a.generation, a.outcome, fmtT(a.fini), b.generation, fmtT(b.started)),
					Evidence: ev})
			case b.started != nil && b.started.Before(*a.fini):
				out = append(out, Violation{Rule: RuleEarlyClaim, JobID: id,
					Detail: fmt.Sprintf("generation %d was claimed at %s, before generation %d's lease was reaped at %s",
						b.generation, fmtT(b.started), a.generation, fmtT(a.fini)),
					Evidence: ev})
			}
		}
		if j != nil && j.schedule == "" {
			for i, r := range runs {
				if r.outcome == "succeeded" && i < len(runs)-1 {
					out = append(out, Violation{Rule: RuleStaleWrite, JobID: id,
						Detail:   fmt.Sprintf("one-off job succeeded with generation %d, yet generation %d ran after it", r.generation, runs[len(runs)-1].generation),
						Evidence: []string{r.String(), runs[len(runs)-1].String()}})
					break
				}
			}
		}
	}
	return out
}

// checkServerLog holds the store to what it told the pool: an accepted
// completion is the run's outcome, a refused one left no trace.
func checkServerLog(e *evidence) []Violation {
	var out []Violation
	for _, l := range e.server {
		if e.jobs[l.rec.JobID] == nil {
			continue // checkLost or checkUnasked says why
		}
		var run *runRow
		for _, r := range e.runs[l.rec.JobID] {
			if r.generation == l.rec.Generation && r.generation > 0 {
				run = &r
				break
			}
		}
		switch {
		case l.rec.Msg == msgFinished && run == nil:
			out = append(out, Violation{Rule: RuleStaleWrite, JobID: l.rec.JobID,
				Detail:   fmt.Sprintf("completion of generation %d was accepted but the database has no run of it", l.rec.Generation),
				Evidence: []string{l.at}})
		case l.rec.Msg == msgFinished && run.outcome != l.rec.Outcome:
			out = append(out, Violation{Rule: RuleStaleWrite, JobID: l.rec.JobID,
				Detail:   fmt.Sprintf("completion %s of generation %d was accepted but its run says %s", l.rec.Outcome, l.rec.Generation, run.outcome),
				Evidence: []string{l.at, run.String()}})
		case l.rec.Msg == msgRefused && run != nil && run.outcome == l.rec.Outcome && slices.Contains(workerOutcomes, run.outcome):
			out = append(out, Violation{Rule: RuleStaleWrite, JobID: l.rec.JobID,
				Detail:   fmt.Sprintf("completion %s of generation %d was refused as stale yet recorded", l.rec.Outcome, l.rec.Generation),
				Evidence: []string{l.at, run.String()}})
		}
	}
	return out
}

// slotFinal reports whether r settles its slot: no other run of that slot
// may follow.
func slotFinal(r runRow) bool {
	return r.outcome == "succeeded" || r.outcome == "cancelled" || r.outcome == "missed" || r.gaveUp
}

func checkSlots(e *evidence) []Violation {
	var out []Violation
	for _, id := range sortedKeys(e.jobs) {
		j := e.jobs[id]
		if j.schedule == "" || len(e.runs[id]) == 0 {
			continue
		}
		bySlot := map[time.Time][]runRow{}
		var first, last time.Time
		missedRows := int64(0)
		for _, r := range e.runs[id] {
			if r.slot == nil {
				continue
			}
			s := r.slot.UTC()
			bySlot[s] = append(bySlot[s], r)
			if first.IsZero() || s.Before(first) {
				first = s
			}
			if s.After(last) {
				last = s
			}
			if r.outcome == "missed" {
				missedRows++
			}
		}
		for _, s := range sortedTimes(bySlot) {
			var final []string
			for _, r := range bySlot[s] {
				if slotFinal(r) {
					final = append(final, r.String())
				}
			}
			if len(final) > 1 {
				out = append(out, Violation{Rule: RuleSlotTwice, JobID: id,
					Detail: fmt.Sprintf("slot %s was settled %d times", s.Format(dbTime), len(final)), Evidence: final})
			}
		}
		sched, err := schedule.Parse(j.schedule, j.timezone)
		if err != nil {
			out = append(out, Violation{Rule: RuleSlotMissing, JobID: id,
				Detail: fmt.Sprintf("stored schedule does not parse: %v", err), Evidence: []string{j.String()}})
			continue
		}
		var gaps []time.Time
		gapCount := int64(0)
		for s, n := first, 0; !s.IsZero() && !s.After(last) && n < maxSlotWalk; s, n = sched.Next(s), n+1 {
			if len(bySlot[s]) == 0 {
				gapCount++
				if len(gaps) < 5 {
					gaps = append(gaps, s)
				}
			}
		}
		if gapCount > 0 && gapCount > j.missedSlots-missedRows {
			ev := []string{j.String()}
			for _, g := range gaps {
				ev = append(ev, "no run row for slot "+g.Format(dbTime))
			}
			out = append(out, Violation{Rule: RuleSlotMissing, JobID: id,
				Detail: fmt.Sprintf("%d slots between %s and %s have no run row and are not counted missed",
					gapCount, first.Format(dbTime), last.Format(dbTime)),
				Evidence: ev})
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func sortedTimes(m map[time.Time][]runRow) []time.Time {
	keys := make([]time.Time, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b time.Time) int { return a.Compare(b) })
	return keys
}
