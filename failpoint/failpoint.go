// Package failpoint kills the process at named points of the code, so that
// crash tests can stop sked exactly where a crash hurts most (after a claim
// commits, before a completion commits, in the middle of a batch insert).
//
// The environment variable SKED_FAILPOINT arms one point: "NAME" kills at its
// first hit, "NAME:N" at its Nth. The process sends itself SIGKILL: no
// deferred function, no buffered write and no shutdown runs, as in a real
// crash. The variable is read once, at start; when it is unset Hit is one
// comparison of an empty string.
package failpoint

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// Env is the environment variable that arms a point.
const Env = "SKED_FAILPOINT"

// Names of the points the store hits.
const (
	// AfterClaimCommit is in sqlite RunClaim, after the claim transaction
	// committed and before the claims are returned to the caller.
	AfterClaimCommit = "after-claim-commit"
	// BeforeFinishCommit is in the sqlite group committer, inside the
	// transaction of a group of completions, just before COMMIT.
	BeforeFinishCommit = "before-finish-commit"
	// MidBatchInsert is in sqlite job creation, inside the transaction of a
	// batch of two or more jobs, after half of them were inserted.
	MidBatchInsert = "mid-batch-insert"
)

// armed is the point SKED_FAILPOINT names; its name is empty when none is.
var armed = parse(os.Getenv(Env))

type point struct {
	name string
	at   int64        // the hit that kills, from 1
	hits atomic.Int64 // hits so far
}

func parse(v string) *point {
	name, n, _ := strings.Cut(v, ":")
	at, err := strconv.ParseInt(n, 10, 64)
	if err != nil || at < 1 {
		at = 1
	}
	return &point{name: name, at: at}
}

// Hit kills the process with SIGKILL if name is the armed point and this is
// the hit it waits for; otherwise it returns at once.
func Hit(name string) {
	if armed.name == "" || armed.name != name {
		return
	}
	if armed.hits.Add(1) != armed.at {
		return
	}
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	select {} // the signal is on its way; nothing more may run
}
