package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sked-dev/sked/clock"
)

// WatchClock registers the clock guard's measures: whether firing is held
// after a backward step, and the steps seen. It returns the function the
// guard calls on every step.
func (m *Metrics) WatchClock(holding func() bool) func(clock.Step) {
	steps := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sked_clock_steps_total",
		Help: "Steps of the wall clock seen by the clock guard, by direction.",
	}, []string{"direction"})
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sked_clock_guard_holding",
		Help: "1 while firing is held because the wall clock went back past the latest time seen.",
	}, func() float64 {
		if holding() {
			return 1
		}
		return 0
	})
	m.reg.MustRegister(steps, held)
	steps.WithLabelValues("backward")
	steps.WithLabelValues("forward")
	return func(s clock.Step) {
		if s.Backward() {
			steps.WithLabelValues("backward").Inc()
		} else {
			steps.WithLabelValues("forward").Inc()
		}
	}
}
