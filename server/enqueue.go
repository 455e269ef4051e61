package server

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/wire"
)

// Enqueue creates the job req defines, in-process, as POST /jobs does with
// req as its body: the same checks, defaults and wake-up of the dispatcher
// (handlers.API.JobCreate). created is false when req's idempotency key
// named an existing job, which is returned unchanged. A bad field is a
// *db.ValidationError (errors.Is db.ErrInvalid): what the API answers 422
// for. Call it after Start.
func (s *Server) Enqueue(ctx context.Context, req wire.JobCreateRequest) (job db.Job, created bool, err error) {
	p, err := s.parts()
	if err != nil {
		return db.Job{}, false, err
	}
	return p.api.JobCreate(ctx, req)
}

// Put gives the job named name the definition req, as PUT
// /jobs/by-name/{name} and sked apply do: it creates the job when no job
// that is not cancelled has the name, and otherwise changes that job to
// req; the same Put again changes nothing. A program that declares its
// recurring jobs at every start puts them: Enqueue of a name in use is
// refused. res.Created and res.Changes say what it did; a bad field is a
// *db.ValidationError, a change the job's state forbids a
// *db.ConflictError.
func (s *Server) Put(ctx context.Context, name string, req wire.JobCreateRequest) (res db.JobPutResult, err error) {
	p, err := s.parts()
	if err != nil {
		return db.JobPutResult{}, err
	}
	return p.api.JobPut(ctx, name, req)
}

// EnqueueTx is Enqueue inside tx, a transaction of the caller's on the
// PostgreSQL database (and schema) the server uses: the job exists if and
// only if tx commits, together with the caller's own writes (an order and
// the job that ships it). The checks are Enqueue's; the dispatchers of
// every node are woken when tx commits. A failed statement leaves tx
// aborted, as any does: roll it back. On SQLite it fails: use Enqueue.
func (s *Server) EnqueueTx(ctx context.Context, tx pgx.Tx, req wire.JobCreateRequest) (job db.Job, created bool, err error) {
	p, err := s.parts()
	if err != nil {
		return db.Job{}, false, err
	}
	pg, ok := p.store.(*postgres.Store)
	if !ok {
		return db.Job{}, false, errors.New("EnqueueTx needs the PostgreSQL store (Config.DB a postgres:// URL); on SQLite, use Enqueue")
	}
	params, err := p.api.JobParams(req)
	if err != nil {
		return db.Job{}, false, err
	}
	return pg.JobCreateTx(ctx, tx, params)
}
