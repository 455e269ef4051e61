package dbtest

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/sked-dev/sked/db"
)

// CommitLost is a real store whose first claim that leases jobs (after Arm,
// or from the start) commits and answers as a claim whose COMMIT went out
// before the connection to PostgreSQL broke: db.ErrCommitUnknown. Only
// db.Store's methods are seen through it.
type CommitLost struct {
	db.Store
	lost atomic.Bool // set once a claim's answer was lost, and while disarmed
}

// Disarm lets claims answer, until Arm.
func (s *CommitLost) Disarm() { s.lost.Store(true) }

// Arm makes the next claim that leases jobs lose its answer.
func (s *CommitLost) Arm() { s.lost.Store(false) }

// Lost reports whether a claim's answer was lost since the last Arm.
func (s *CommitLost) Lost() bool { return s.lost.Load() }

// RunClaim claims as the store does, and loses the answer of the first
// claim that leased jobs while armed.
func (s *CommitLost) RunClaim(ctx context.Context, p db.RunClaimParams) ([]db.Claim, error) {
	claims, err := s.Store.RunClaim(ctx, p)
	if err == nil && len(claims) > 0 && s.lost.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("claim runs: commit: no answer from the server: %w: unexpected EOF", db.ErrCommitUnknown)
	}
	return claims, err
}
