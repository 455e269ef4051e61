package cli

import (
	"context"
	"net/http"
	"strings"
	"time"
)

// pickWithin bounds how long pickServer waits for the servers' answers.
const pickWithin = 2 * time.Second

// pickServer chooses, of several --server URLs (the nodes of one
// database), the one a client command talks to: the first in their order
// that is ready (GET /readyz answers 200: it reaches the database), else the
// first that answers at all (its 503 then says what is wrong), else the
// first, whose failure the command then reports. All are asked at once,
// without the token (/readyz needs none), for at most pickWithin, so that a
// node that is down costs a command no more than that.
func pickServer(ctx context.Context, servers []string) string {
	ctx, cancel := context.WithTimeout(ctx, pickWithin)
	defer cancel()
	found := make([]chan serverState, len(servers))
	for i, server := range servers {
		found[i] = make(chan serverState, 1)
		go func() {
			found[i] <- readiness(ctx, server)
		}()
	}
	best, bestAt := serverSilent, 0
	for i := range servers {
		// In order: the first ready server is chosen without waiting for
		// the later ones.
		if got := <-found[i]; got > best {
			best, bestAt = got, i
			if best == serverReady {
				break
			}
		}
	}
	return servers[bestAt]
}

// A serverState is what a server's /readyz told, the better the greater.
type serverState int

const (
	serverSilent   serverState = iota // no answer
	serverAnswered                    // an answer other than 200
	serverReady                       // 200
)

// readiness asks server's /readyz.
func readiness(ctx context.Context, server string) serverState {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(server, "/")+"/readyz", nil)
	if err != nil {
		return serverSilent
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return serverSilent
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return serverReady
	}
	return serverAnswered
}
