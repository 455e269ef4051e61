package server

import (
	"fmt"
	"net"
	"strings"
)

// checkExposure refuses a listener of sked's own beyond loopback without a
// token, where anyone who can reach it could run jobs, unless cfg.Insecure
// says so. Without a listener (Handler served by the embedding program)
// there is nothing to check.
func checkExposure(cfg Config) error {
	addr := cfg.Addr
	if cfg.Listener != nil {
		addr = cfg.Listener.Addr().String()
	}
	if addr == "" || cfg.authenticates() || cfg.Insecure || isLoopback(addr) {
		return nil
	}
	return &ExposedError{Addr: addr}
}

// ExposedError is Start's refusal of a listener of sked's own that reaches
// beyond loopback while Config has no token of any role (Tokens,
// WorkerTokens, ReadTokens) and Insecure is unset.
// A command line built on Server says it in terms of its own flags.
type ExposedError struct {
	Addr string // where sked would listen
}

func (e *ExposedError) Error() string {
	return fmt.Sprintf("listening on %s reaches beyond loopback, where anyone who can reach it could run jobs, and Config has no token: "+
		"set one in Config.Tokens (clients send it as Authorization: Bearer …), listen on loopback, "+
		"or set Config.Insecure to serve without authentication", e.Addr)
}

// isLoopback reports whether addr (host:port) listens on loopback only:
// localhost, 127.0.0.0/8 or ::1. An empty host listens everywhere.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && LoopbackHost(host)
}

// LoopbackHost reports whether host (a name or an IP address, without
// port or brackets) is this machine's loopback: localhost, 127.0.0.0/8 or
// ::1.
func LoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
