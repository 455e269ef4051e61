package db

import (
	"context"
	"fmt"
)

// MaxBatch bounds the jobs of one JobCreateBatch call (and of one
// POST /jobs/batch request).
const MaxBatch = 1000

// BatchCreator creates many jobs in one atomic unit; part of Store.
type BatchCreator interface {
	// JobCreateBatch inserts the jobs of ps in one transaction: all of them
	// or, on an error, none. A job whose IdempotencyKey names an existing job
	// (or an earlier job of the same batch) is not created again; the
	// existing job takes its place in the result, which is in the order of
	// ps. It returns a *ValidationError, with Field "jobs[i].field", for a
	// bad element.
	JobCreateBatch(ctx context.Context, ps []JobCreateParams) ([]Job, error)
}

// CheckBatch refuses a batch of n jobs above MaxBatch with a
// *ValidationError on the field "jobs".
func CheckBatch(n int) error {
	if n > MaxBatch {
		return &ValidationError{Field: "jobs", Msg: fmt.Sprintf("%d jobs in one batch; at most %d are allowed", n, MaxBatch)}
	}
	return nil
}
