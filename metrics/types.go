package metrics

import (
	"log/slog"
	"sync"

	"github.com/sked-dev/sked/db"
)

// MaxTypeLabels is how many job types get a type label of their own. Job
// types are the users' to name: a client that made up a type per job would
// otherwise add a series to every metric labelled by type for each job,
// and slow every scrape and the Prometheus server behind it for good.
const MaxTypeLabels = 200

// OtherTypes is the type label of the job types after the first
// MaxTypeLabels. No job type can be named so: types are letters, digits
// and _ . : - only.
const OtherTypes = "(other)"

// typeLabels hands out the type label values, the first MaxTypeLabels
// types seen as themselves and the rest as OtherTypes, for as long as the
// process lives: a type keeps its label once it has one, so a counter's
// series never changes its meaning. Safe for concurrent use.
type typeLabels struct {
	logger *slog.Logger

	mu   sync.Mutex
	seen map[string]bool // guarded by mu
	full bool            // guarded by mu: a type has been given OtherTypes
}

func newTypeLabels(logger *slog.Logger) *typeLabels {
	return &typeLabels{logger: logger, seen: map[string]bool{}}
}

// label is typ's type label value. The first type turned away is logged,
// once.
func (l *typeLabels) label(typ string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[typ] {
		return typ
	}
	if len(l.seen) < MaxTypeLabels {
		l.seen[typ] = true
		return typ
	}
	if !l.full {
		l.full = true
		l.logger.Warn("metrics: more job types than get a label of their own; the rest are counted under type "+OtherTypes,
			"max", MaxTypeLabels, "type", typ)
	}
	return OtherTypes
}

// byLabel sums counts by type into counts by type label.
func (l *typeLabels) byLabel(byType map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(byType))
	for typ, n := range byType {
		out[l.label(typ)] += n
	}
	return out
}

// dueByLabel folds how far behind each type is into the same by type
// label: the oldest due time and the sum of the counts.
func (l *typeLabels) dueByLabel(byType map[string]db.Due) map[string]db.Due {
	out := make(map[string]db.Due, len(byType))
	for typ, d := range byType {
		label := l.label(typ)
		if prev, ok := out[label]; ok {
			d.NextMinute += prev.NextMinute
			if d.Oldest.IsZero() || !prev.Oldest.IsZero() && prev.Oldest.Before(d.Oldest) {
				d.Oldest = prev.Oldest
			}
		}
		out[label] = d
	}
	return out
}
