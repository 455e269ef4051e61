package server

import (
	"strings"
	"testing"
)

func TestCheckTokens(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string // part of the error; "" for none
	}{
		{"None", Config{}, ""},
		{"OneOfEach", Config{Tokens: []string{"a"}, WorkerTokens: []string{"w1", "w2"}, ReadTokens: []string{"r"}}, ""},
		{"RepeatedInOneRole", Config{Tokens: []string{"a", "a"}}, ""},
		{"AdminAndWorker", Config{Tokens: []string{"a"}, WorkerTokens: []string{"a"}}, "both in --token (SKED_TOKEN) and in --worker-token (SKED_WORKER_TOKEN)"},
		{"WorkerAndReader", Config{WorkerTokens: []string{"x"}, ReadTokens: []string{"x"}}, "both in --worker-token (SKED_WORKER_TOKEN) and in --read-token (SKED_READ_TOKEN)"},
		{"Empty", Config{ReadTokens: []string{""}}, "an empty token in --read-token (SKED_READ_TOKEN)"},
	} {
		err := checkTokens(c.cfg)
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
}

// TestCheckExposure_AnyRole: a worker or read token alone also turns
// authentication on, so a listener beyond loopback is allowed.
func TestCheckExposure_AnyRole(t *testing.T) {
	for _, cfg := range []Config{{WorkerTokens: []string{"w"}}, {ReadTokens: []string{"r"}}} {
		cfg.Addr = "0.0.0.0:8080"
		if err := checkExposure(cfg); err != nil {
			t.Errorf("tokens %v/%v: %v; want allowed", cfg.WorkerTokens, cfg.ReadTokens, err)
		}
	}
}
