package checker

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sked-dev/sked/lifecycle"
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

// cancelAcked reports whether r is a cancel the server acknowledged.
func cancelAcked(r ClientRecord) bool { return r.Op == OpCancel && r.Status/100 == 2 }

func checkLost(e *evidence) []Violation {
	var out []Violation
	byKey := map[string]line[ClientRecord]{}
	// A job's key is free for a new job once a cancel of it was
	// acknowledged (cancelled so far), or, when no cancel of it was ever
	// acknowledged in the log, if it ended cancelled: a cancel whose answer
	// was lost (cancelledAtAll says which jobs had one acknowledged).
	cancelled, cancelledAtAll := map[string]bool{}, map[string]bool{}
	for _, c := range e.client {
		if cancelAcked(c.rec) {
			cancelledAtAll[c.rec.JobID] = true
		}
	}
	keyFreed := func(id string) bool {
		if cancelled[id] {
			return true
		}
		j := e.jobs[id]
		return !cancelledAtAll[id] && j != nil && j.state == "cancelled"
	}
	for _, c := range e.client {
		if cancelAcked(c.rec) {
			cancelled[c.rec.JobID] = true
		}
		if c.rec.Op != OpEnqueue {
			continue
		}
		if k := c.rec.IdempotencyKey; k != "" {
			first, ok := byKey[k]
			switch {
			case !ok || keyFreed(first.rec.JobID):
				byKey[k] = c
			case first.rec.JobID != c.rec.JobID:
				out = append(out, Violation{Rule: RuleDuplicate, JobID: c.rec.JobID,
					Detail:   fmt.Sprintf("idempotency key %q was acknowledged as jobs %s and %s", k, first.rec.JobID, c.rec.JobID),
					Evidence: []string{first.at, c.at}})
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

// executedOutcomes are the outcomes of a run that a worker ended after it
// ran the job: the database's only sign of an execution without a jobs log.
var executedOutcomes = []string{"succeeded", "failed", "timed_out", "cancelled"}

// acknowledged returns the jobs whose creation was acknowledged, each with
// the evidence line that shows it: the client log's enqueues, or every job
// in the database when no client log was given.
func (e *evidence) acknowledged() map[string]string {
	acked := map[string]string{}
	if e.in.ClientLog == "" {
		for id, j := range e.jobs {
			acked[id] = j.String()
		}
		return acked
	}
	for _, c := range e.client {
		if _, ok := acked[c.rec.JobID]; c.rec.Op == OpEnqueue && !ok {
			acked[c.rec.JobID] = c.at
		}
	}
	return acked
}

func checkNeverRan(e *evidence) []Violation {
	if !e.in.Finished {
		return nil
	}
	ran, where := map[string]bool{}, "no run that a worker ended"
	if e.in.JobsLog != "" {
		where = "no execution in the jobs log"
		for _, x := range e.execs {
			ran[x.jobID] = true
		}
	} else {
		for id, runs := range e.runs {
			ran[id] = slices.ContainsFunc(runs, func(r runRow) bool { return slices.Contains(executedOutcomes, r.outcome) })
		}
	}
	acked := e.acknowledged()
	var out []Violation
	for _, id := range sortedKeys(acked) {
		j := e.jobs[id]
		if j == nil || j.state == "cancelled" || ran[id] {
			continue // checkLost says why a job is missing
		}
		var claimed []string
		for _, r := range e.runs[id] {
			if r.generation > 0 {
				claimed = append(claimed, r.String())
			}
		}
		kind := "one-off"
		if j.schedule != "" {
			kind = "recurring"
			if len(claimed) == 0 {
				continue // checkSlots judges a schedule that never fired
			}
		} else if j.state != "done" && j.state != "dead" {
			continue // checkLost judges a one-off job that is not final
		}
		out = append(out, Violation{Rule: RuleNeverRan, JobID: id,
			Detail:   fmt.Sprintf("acknowledged %s job is %s after %d claims, yet never executed: %s", kind, j.state, len(claimed), where),
			Evidence: append([]string{acked[id], j.String()}, claimed[:min(len(claimed), maxGapEvidence)]...)})
	}
	return out
}

func checkEmpty(e *evidence) []Violation {
	if !e.in.Finished {
		return nil
	}
	var empty []string
	if len(e.jobs) == 0 {
		empty = append(empty, "the database "+e.in.DB+" holds no job")
	}
	if e.in.ClientLog != "" && !slices.ContainsFunc(e.client, func(c line[ClientRecord]) bool { return c.rec.Op == OpEnqueue }) {
		empty = append(empty, "the client log "+e.in.ClientLog+" holds no acknowledged enqueue")
	}
	if e.in.JobsLog != "" && len(e.execs) == 0 {
		empty = append(empty, "the jobs log "+e.in.JobsLog+" holds no execution")
	}
	if e.in.ServerLog != "" && len(e.server) == 0 {
		empty = append(empty, "the server log "+e.in.ServerLog+" holds no completion")
	}
	if len(empty) == 0 {
		return nil
	}
	return []Violation{{Rule: RuleEmpty, JobID: "-", Detail: "the run is said to have finished, but its evidence shows no work", Evidence: empty}}
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
	if e.in.ClientLog == "" {
		return nil // without the client's log, nothing says who asked
	}
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
// process died, the end of its lease as the database knows it, or its last
// mark if that came later. ok is false when the database has no run of x's
// generation.
func (e *evidence) liveEnd(x *execution) (end int64, evidence string, ok bool) {
	if x.end != 0 {
		return x.end, "", true
	}
	for _, r := range e.runs[x.jobID] {
		if r.generation != x.generation {
			continue
		}
		if r.fini != nil {
			return max(r.fini.UnixNano(), x.last), r.String(), true
		}
		if j := e.jobs[x.jobID]; j != nil && j.leaseGeneration == x.generation && j.leaseUntil != nil {
			return max(j.leaseUntil.UnixNano(), x.last), j.String(), true
		}
		return math.MaxInt64, r.String(), true
	}
	return math.MaxInt64, "", false
}

func checkOverlap(e *evidence) []Violation {
	return overlaps(e.execs, e.dupExecs, e.liveEnd)
}

// overlaps finds the executions (ordered by job, then start) that started
// while another execution of their job was live, as liveEnd says; dups are
// violations found already. liveEnd's ok false is a generation executed
// that was never issued.
func overlaps(execs []*execution, dups []Violation, liveEnd func(*execution) (int64, string, bool)) []Violation {
	out := slices.Clone(dups)
	var prev *execution // the execution of the same job live the longest so far
	var prevEnd int64
	var prevWhy string
	for _, x := range execs {
		end, why, ok := liveEnd(x)
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

// checkSlots holds every recurring job to its schedule: each slot settled
// at most once and every due slot accounted for (see RuleSlotMissing). It
// returns how many due slots it walked.
func checkSlots(e *evidence) (int, []Violation) {
	var out []Violation
	walked := 0
	for _, id := range sortedKeys(e.jobs) {
		j := e.jobs[id]
		if j.schedule == "" {
			continue
		}
		bySlot, spans, vs := slotRows(j, e.runs[id])
		out = append(out, vs...)
		sched, err := schedule.Parse(j.schedule, j.timezone)
		if err != nil {
			out = append(out, Violation{Rule: RuleSlotMissing, JobID: id,
				Detail: fmt.Sprintf("stored schedule does not parse: %v", err), Evidence: []string{j.String()}})
			continue
		}
		n, vs := e.accountSlots(j, sched, bySlot, spans)
		walked += n
		out = append(out, vs...)
	}
	return walked, out
}

// slotRows indexes a recurring job's rows by slot, leaving out operators'
// extra runs and the missed rows that stand for a span of slots, which it
// returns apart; it reports slots settled twice and missed rows without a
// reason.
func slotRows(j *jobRow, runs []runRow) (bySlot map[time.Time][]runRow, spans []runRow, out []Violation) {
	bySlot = map[time.Time][]runRow{}
	for _, r := range runs {
		if r.slot == nil || r.reason == reasonManual {
			continue
		}
		if r.slotCount > 0 {
			spans = append(spans, r)
		} else {
			bySlot[r.slot.UTC()] = append(bySlot[r.slot.UTC()], r)
		}
		if r.outcome == "missed" {
			if r.reason == "" {
				out = append(out, Violation{Rule: RuleSlotMissing, JobID: j.id,
					Detail: fmt.Sprintf("slot %s is recorded missed without a reason", fmtT(r.slot)), Evidence: []string{r.String()}})
			}
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
			out = append(out, Violation{Rule: RuleSlotTwice, JobID: j.id,
				Detail: fmt.Sprintf("slot %s was settled %d times", s.Format(dbTime), len(final)), Evidence: final})
		}
	}
	return bySlot, spans, out
}

// reasonManual marks an operator's extra run (db.ReasonManual): its slot is
// its own time, not one of the schedule's.
const reasonManual = "manual"

// maxGapEvidence bounds the slots a slot_missing violation lists.
const maxGapEvidence = 5

// accountSlots walks j's slots from its first, the schedule's first after
// created_at, while they are due by the end of the run, and reports those
// without a row, or a span row, that accounts for them, and the span rows
// whose count is not the schedule's slots between their ends. It returns
// how many slots it walked.
func (e *evidence) accountSlots(j *jobRow, sched *schedule.Schedule, bySlot map[time.Time][]runRow, spans []runRow) (int, []Violation) {
	end := e.end
	if j.state == "cancelled" && j.updated.Before(end) {
		end = *j.updated // no slot is due after a cancel
	}
	open := e.tailOpen(j, bySlot, end)
	var (
		gaps        []time.Time
		last        time.Time
		gapCount    int64
		walked      int
		pendingGaps bool
		inside      = map[int]int64{} // slots walked in each span
	)
	for s := sched.Next(*j.created); !s.IsZero() && !lifecycle.DueAt(j.id, s, j.jitter).After(end) && walked < maxSlotWalk; s = sched.Next(s) {
		walked++
		pending := j.slot != nil && !s.Before(*j.slot)
		if len(bySlot[s]) > 0 || (open && pending) || inSpan(spans, s, inside) {
			continue
		}
		gapCount++
		last, pendingGaps = s, pendingGaps || pending
		if len(gaps) < maxGapEvidence {
			gaps = append(gaps, s)
		}
	}
	var out []Violation
	for i, sp := range spans {
		if inside[i] != sp.slotCount {
			out = append(out, Violation{Rule: RuleSlotMissing, JobID: j.id, Evidence: []string{sp.String(), j.String()},
				Detail: fmt.Sprintf("a missed row stands for %d slots from %s to %s, where the schedule has %d",
					sp.slotCount, fmtT(sp.slot), fmtT(sp.lastSlot), inside[i])})
		}
	}
	if gapCount == 0 {
		return walked, out
	}
	v := Violation{Rule: RuleSlotMissing, JobID: j.id, Evidence: []string{j.String()},
		Detail: fmt.Sprintf("%d due slots from %s to %s have no run row and are not counted missed",
			gapCount, gaps[0].Format(dbTime), last.Format(dbTime))}
	if pendingGaps {
		due := lifecycle.DueAt(j.id, *j.slot, j.jitter)
		v.Detail += fmt.Sprintf("; the schedule stopped firing: its pending slot %s fell due at %s, %s before the end of the run at %s, and was never claimed",
			j.slot.Format(dbTime), due.Format(dbTime), end.Sub(due).Round(time.Millisecond), end.Format(dbTime))
	}
	for _, g := range gaps {
		v.Evidence = append(v.Evidence, "no run row for slot "+g.Format(dbTime))
	}
	if more := gapCount - int64(len(gaps)); more > 0 {
		v.Evidence = append(v.Evidence, fmt.Sprintf("… and %d more up to %s", more, last.Format(dbTime)))
	}
	return walked, append(out, v)
}

// inSpan reports whether slot s lies in one of spans, counting it in that
// span's entry of inside.
func inSpan(spans []runRow, s time.Time, inside map[int]int64) bool {
	for i, sp := range spans {
		if !s.Before(*sp.slot) && sp.lastSlot != nil && !s.After(*sp.lastSlot) {
			inside[i]++
			return true
		}
	}
	return false
}

// tailOpen reports whether j's pending slot and the slots after it may
// still be open at end, when the run ended (see RuleSlotMissing).
func (e *evidence) tailOpen(j *jobRow, bySlot map[time.Time][]runRow, end time.Time) bool {
	switch {
	case j.slot == nil:
		return false
	case !e.in.Finished, j.state == "paused", j.state == "running", len(bySlot[*j.slot]) > 0:
		return true
	}
	return lifecycle.DueAt(j.id, *j.slot, j.jitter).After(end.Add(-DuePending))
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
