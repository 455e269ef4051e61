// Command embed runs sked inside a Go program of its own. The program's
// HTTP server serves its own page at / and sked's API and dashboard under
// /sked/; sked's pool runs jobs of type "greet" with a Go function; at start
// the program enqueues a greeting in-process, and, when SKED_DB is a
// PostgreSQL URL, signs a user up: their row and the job that greets them
// are written in one transaction of its own, so that there is neither
// without the other. See docs/embedding.md.
//
//	go run ./examples/embed                        # SQLite file embed.db
//	SKED_DB=postgres://user:pass@host/db go run ./examples/embed
//	open http://127.0.0.1:8080/sked/   (EMBED_ADDR=127.0.0.1:9090 to listen elsewhere)
//	curl -s --json '{"type": "greet", "payload": {"name": "Ada"}}' http://127.0.0.1:8080/sked/jobs
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/server"
	"github.com/sked-dev/sked/wire"
	"github.com/sked-dev/sked/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ln, err := net.Listen("tcp", cmp.Or(os.Getenv("EMBED_ADDR"), "127.0.0.1:8080"))
	if err == nil {
		err = run(ctx, ln, cmp.Or(os.Getenv("SKED_DB"), "embed.db"), log)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

// run serves the program on ln, with sked on the store dsn, until ctx ends.
func run(ctx context.Context, ln net.Listener, dsn string, log *slog.Logger) error {
	// No Addr: sked opens no listener of its own; this program serves its
	// Handler. sked's checks (Tokens, AllowedHosts) still guard it.
	s := server.New(server.Config{DB: dsn, Logger: log})
	s.Handle("greet", greet)
	if err := s.Start(ctx); err != nil {
		return err
	}
	defer s.Close() // Run closes the server; this covers a return before it

	// In-process, through the checks of POST /jobs. The key makes a
	// restart of the program find the job it created before.
	job, _, err := s.Enqueue(ctx, wire.JobCreateRequest{
		Type: "greet", Payload: json.RawMessage(`{"name": "Grace"}`), IdempotencyKey: "greet-grace",
	})
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	log.Info("enqueued", "job", job.ID)
	if postgres.IsURL(dsn) {
		if err := signUp(ctx, s, dsn, "Ada"); err != nil {
			return err
		}
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "the program's own page; sked is at /sked/\n")
	})
	mux.Handle("/sked/", http.StripPrefix("/sked", s.Handler()))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	// sked runs until ctx ends, or the program's server fails; then both
	// stop. Run keeps the store open while running jobs finish, so requests
	// still in flight are answered.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.Run(gctx) })
	g.Go(func() error {
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return hs.Shutdown(sctx)
	})
	return g.Wait()
}

// signUp stores a user and the job that greets them in one transaction of
// the program's own on sked's PostgreSQL database: both are written, or
// neither. The job runs once the transaction commits.
func signUp(ctx context.Context, s *server.Server, dsn, name string) error {
	conn, err := postgres.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("sign up: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS users (name text PRIMARY KEY)`); err != nil {
		return fmt.Errorf("sign up: %w", err)
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO users (name) VALUES ($1) ON CONFLICT DO NOTHING`, name); err != nil {
			return fmt.Errorf("sign up %s: %w", name, err)
		}
		payload, _ := json.Marshal(map[string]string{"name": name})
		_, _, err := s.EnqueueTx(ctx, tx, wire.JobCreateRequest{Type: "greet", Payload: payload, IdempotencyKey: "welcome-" + name})
		if err != nil {
			return fmt.Errorf("sign up %s: %w", name, err)
		}
		return nil
	})
}

// greet is the handler of "greet" jobs. It may run more than once for one
// job (its process can die mid-run), so a real handler makes its side
// effect idempotent (job.IdempotencyKey, job.ID) and fenced with
// job.Generation, and returns as soon as ctx is done (docs/embedding.md).
// A returned error retries with backoff; worker.Permanent(err) fails
// without retry.
func greet(ctx context.Context, job *worker.Job) error {
	var p struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(job.Payload, &p); err != nil || p.Name == "" {
		return worker.Permanent(fmt.Errorf("payload must be {\"name\": \"…\"}: %v", err))
	}
	if err := ctx.Err(); err != nil {
		return err // the run is over: do nothing more
	}
	fmt.Fprintf(job.Output, "hello, %s (attempt %d, generation %d)\n", p.Name, job.Attempt, job.Generation)
	return nil
}
