// Package testnet has the network stand-ins of tests: a port whose service
// is not the one a test's client expects.
package testnet

import (
	"net"
	"sync"
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

// Silent listens on a loopback port that accepts every connection and
// never answers on it, as a server that hangs does (or a firewall that
// lets the connection through and drops what follows), and returns its
// address. It stops when the test ends.
func Silent(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	return ln.Addr().String()
}
