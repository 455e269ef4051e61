package worker

import (
	"context"
	"log/slog"
	"time"
)

// every runs fn at once and then every d until ctx is done.
func every(ctx context.Context, d time.Duration, fn func(context.Context)) error {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// orDiscard is log, or a logger that discards when it is nil.
func orDiscard(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}
