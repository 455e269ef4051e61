package server

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckExposure(t *testing.T) {
	for _, c := range []struct {
		addr     string
		tokens   []string
		insecure bool
		ok       bool
	}{
		{"", nil, false, true}, // no listener of sked's own
		{"127.0.0.1:8080", nil, false, true},
		{"127.1.2.3:8080", nil, false, true},
		{"localhost:8080", nil, false, true},
		{"[::1]:8080", nil, false, true},
		{"0.0.0.0:8080", nil, false, false},
		{":8080", nil, false, false},
		{"[::]:8080", nil, false, false},
		{"192.168.1.10:8080", nil, false, false},
		{"sked.example:8080", nil, false, false},
		{"0.0.0.0:8080", []string{"t"}, false, true},
		{"0.0.0.0:8080", nil, true, true},
	} {
		err := checkExposure(Config{Addr: c.addr, Tokens: c.tokens, Insecure: c.insecure})
		if (err == nil) != c.ok {
			t.Errorf("%s tokens=%v insecure=%v: err = %v, want ok=%v", c.addr, c.tokens, c.insecure, err, c.ok)
		}
		if xe := (*ExposedError)(nil); err != nil && (!errors.As(err, &xe) || !strings.Contains(err.Error(), "Config.Tokens") || !strings.Contains(err.Error(), "Config.Insecure")) {
			t.Errorf("%s: error %q does not say how to fix it", c.addr, err)
		}
	}
}

// TestStart_RefusesExposedWithoutToken starts servers whose listener is
// reachable beyond loopback: without a token they are refused before the
// store is opened, whether they listen on Addr or are given a Listener.
func TestStart_RefusesExposedWithoutToken(t *testing.T) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	for name, cfg := range map[string]Config{"Addr 0.0.0.0:0": {Addr: "0.0.0.0:0"}, "a Listener on 0.0.0.0": {Listener: ln}} {
		cfg.DB = filepath.Join(dir, "sked.db")
		err := New(cfg).Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "beyond loopback") {
			t.Errorf("Run with %s and no token: %v, want a refusal", name, err)
		}
		if _, err := os.Stat(cfg.DB); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Run with %s: the refused server created its database: %v", name, err)
		}
	}
	// Insecure serves as asked.
	s := New(Config{DB: filepath.Join(dir, "sked.db"), Listener: ln, Insecure: true})
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start with Insecure: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
