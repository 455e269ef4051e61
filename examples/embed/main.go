// Command embed runs sked inside a Go program: the API, the scheduler and a
// pool that runs jobs of type "greet" with a Go function. Create one with
//
//	curl -s --json '{"type": "greet", "payload": {"name": "Ada"}}' http://127.0.0.1:8080/jobs
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sked-dev/sked/server"
	"github.com/sked-dev/sked/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	s := server.New(server.Config{DB: "embed.db", Addr: "127.0.0.1:8080", Logger: log})
	s.Handle("greet", greet)
	if err := s.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

// greet is the handler of "greet" jobs. A job may run more than once (its
// worker can die mid-run), so a real handler checks job.IdempotencyKey or
// job.Generation before a side effect that must not repeat. A returned error
// retries with backoff; worker.Permanent(err) fails without retry.
func greet(ctx context.Context, job *worker.Job) error {
	var p struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(job.Payload, &p); err != nil || p.Name == "" {
		return worker.Permanent(fmt.Errorf("payload must be {\"name\": \"…\"}: %v", err))
	}
	fmt.Fprintf(job.Output, "hello, %s (attempt %d)\n", p.Name, job.Attempt)
	return nil
}
