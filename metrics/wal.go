package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// WatchWAL registers the measures of a SQLite write-ahead log:
// sked_wal_bytes, read from size at every scrape (a failed read leaves the
// gauge at -1), and sked_wal_checkpoints_total by result. It returns the
// function the checkpointer calls with each checkpoint's result.
func (m *Metrics) WatchWAL(size func() (int64, error), results ...string) func(result string) {
	bytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sked_wal_bytes",
		Help: "Size of the SQLite write-ahead log file, read at scrape time.",
	}, func() float64 {
		n, err := size()
		if err != nil {
			m.logger.Error("read wal size", "err", err)
			return -1
		}
		return float64(n)
	})
	checkpoints := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sked_wal_checkpoints_total",
		Help: "Checkpoints the WAL checkpointer ran, by result (truncated, busy: a reader kept part of the WAL, error).",
	}, []string{"result"})
	m.reg.MustRegister(bytes, checkpoints)
	for _, r := range results {
		checkpoints.WithLabelValues(r)
	}
	return func(result string) { checkpoints.WithLabelValues(result).Inc() }
}
