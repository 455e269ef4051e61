package server

import "github.com/sked-dev/sked/handlers"

// authenticates reports whether cfg sets tokens of any role, so that the
// API asks every request for one.
func (cfg Config) authenticates() bool {
	return len(cfg.Tokens)+len(cfg.WorkerTokens)+len(cfg.ReadTokens) > 0
}

// checkTokens refuses what handlers.CheckTokens refuses of cfg's tokens.
func checkTokens(cfg Config) error {
	return handlers.CheckTokens(handlers.Config{Tokens: cfg.Tokens, WorkerTokens: cfg.WorkerTokens, ReadTokens: cfg.ReadTokens})
}
