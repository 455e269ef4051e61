package worker

import "time"

// IdleWorkers is how many worker goroutines of p wait for a run.
func (p *Pool) IdleWorkers() int {
	p.idleMu.Lock()
	defer p.idleMu.Unlock()
	return len(p.idle)
}

// SetWorkerIdle sets how long p's worker goroutines wait for their next
// run; call it before Run.
func SetWorkerIdle(p *Pool, d time.Duration) { p.workerIdle = d }
