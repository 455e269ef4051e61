// Package testnet has the network stand-ins of tests: a port whose service
// is not the one a test's client expects.
package testnet

import (
	"net"
	"testing"
)

// Answering listens on a loopback port that answers every connection with
// reply (nothing: it hangs up at once) and closes it, and returns its
// address. It stops when the test ends.
func Answering(t testing.TB, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(reply))
			c.Close()
		}
	}()
	return ln.Addr().String()
}
