package server

import "fmt"

// authenticates reports whether cfg sets tokens of any role, so that the
// API asks every request for one.
func (cfg Config) authenticates() bool {
	return len(cfg.Tokens)+len(cfg.WorkerTokens)+len(cfg.ReadTokens) > 0
}

// checkTokens refuses a token given for two roles, or an empty one: which
// role it has would be a guess.
func checkTokens(cfg Config) error {
	seen := map[string]string{}
	for _, set := range []struct {
		name   string
		tokens []string
	}{{"SKED_TOKEN", cfg.Tokens}, {"SKED_WORKER_TOKEN", cfg.WorkerTokens}, {"SKED_READ_TOKEN", cfg.ReadTokens}} {
		for _, t := range set.tokens {
			if t == "" {
				return fmt.Errorf("an empty token in %s: give each token at least one character", set.name)
			}
			if other, ok := seen[t]; ok && other != set.name {
				return fmt.Errorf("a token is given both in %s and in %s: give each role its own tokens", other, set.name)
			}
			seen[t] = set.name
		}
	}
	return nil
}
