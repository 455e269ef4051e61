package main

import (
	"fmt"
	"net"
	"strings"
)

// serveConfig is what checkExposure judges of sked serve's configuration.
type serveConfig struct {
	Addr     string
	Tokens   []string
	Insecure bool
}

// checkExposure refuses to serve beyond loopback without a token, unless
// --insecure says so.
func (c serveConfig) checkExposure() error {
	if len(c.Tokens) > 0 || c.Insecure || isLoopback(c.Addr) {
		return nil
	}
	return fmt.Errorf("--addr %s listens beyond loopback, where anyone who can reach it could run jobs: "+
		"set a token with --token or SKED_TOKEN (clients send it as Authorization: Bearer …), "+
		"listen on 127.0.0.1, or pass --insecure to serve without authentication", c.Addr)
}

// isLoopback reports whether addr (host:port) listens on loopback only:
// localhost, 127.0.0.0/8 or ::1. An empty host listens everywhere.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
