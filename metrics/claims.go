package metrics

import "github.com/prometheus/client_golang/prometheus"

// WatchClaimWaits registers the measures of the remote workers' waiting
// claims, read from counts at every scrape: sked_claims_waiting, the POST
// /claims waiting now, and sked_claims_refused_total, those refused since
// the start because as many waited as sked serve --max-claim-waits allows.
func (m *Metrics) WatchClaimWaits(counts func() (waiting int, refused int64)) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sked_claims_waiting",
		Help: "Claims of remote workers (POST /claims) waiting for a job now.",
	}, func() float64 { n, _ := counts(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sked_claims_refused_total",
			Help: "Claims of remote workers refused (503) because as many waited as --max-claim-waits allows.",
		}, func() float64 { _, n := counts(); return float64(n) }))
}

// WatchAuthFailures registers the measures of wrong bearer tokens, read
// from counts at every scrape: sked_auth_failures_total, the requests with
// a wrong token since the start, and sked_auth_refused_total, those
// refused (429) because their address had sent too many.
func (m *Metrics) WatchAuthFailures(counts func() (failed, refused int64)) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "sked_auth_failures_total",
		Help: "Requests with a wrong bearer token.",
	}, func() float64 { n, _ := counts(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sked_auth_refused_total",
			Help: "Requests refused (429) because their address had sent too many wrong bearer tokens.",
		}, func() float64 { _, n := counts(); return float64(n) }))
}
