package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/handlers"
	"github.com/sked-dev/sked/wire"
)

// httpClients is how many clients post batches at once.
const httpClients = 4

// HTTP is the result of the runs over the HTTP API on loopback.
type HTTP struct {
	Jobs    int
	Enqueue time.Duration // POST /jobs/batch from httpClients clients
	Remote  time.Duration // claim+complete by a pool over the client package
	Workers int           // slots of that pool
	PeakRSS int64         // server and worker together: one process
}

// RunHTTP serves the API on 127.0.0.1, enqueues cfg.Jobs no-op jobs with
// POST /jobs/batch, then claims and completes them all with a worker.Pool
// of cfg.Workers slots whose store is the HTTP client a remote worker
// (sked work) uses.
func RunHTTP(ctx context.Context, cfg Config) (HTTP, error) {
	cfg = cfg.withDefaults()
	resetPeakRSS()
	e, err := openEnv(ctx, cfg)
	if err != nil {
		return HTTP{}, err
	}
	defer e.close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return HTTP{}, fmt.Errorf("listen: %w", err)
	}
	shutdown := make(chan struct{})
	srv := &http.Server{Handler: handlers.New(handlers.Config{Store: e.stores[0], Shutdown: shutdown})}
	go srv.Serve(ln)
	defer func() { close(shutdown); srv.Close() }()
	base := "http://" + ln.Addr().String()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * cfg.Workers}}
	defer hc.CloseIdleConnections()

	r := HTTP{Jobs: cfg.Jobs}
	start := time.Now()
	if err := postBatches(ctx, hc, base, cfg.Jobs, cfg.Batch); err != nil {
		return r, err
	}
	r.Enqueue = time.Since(start)

	api := &client.Client{BaseURL: base, HTTP: hc, ClaimWait: time.Second}
	c := newCounter(cfg.Jobs)
	start = time.Now()
	// The server refuses claims of more than wire.MaxClaim jobs, and the
	// pool asks for as many as it has free slots.
	r.Workers = min(cfg.Workers, wire.MaxClaim)
	_, stop := runPools(c, []node{{store: api, nextDue: api.NextDue, now: time.Now}}, r.Workers, noop)
	err = c.wait(ctx, 10*time.Minute)
	r.Remote = time.Since(start)
	stop()
	r.PeakRSS = peakRSS()
	return r, err
}

// postBatches creates n no-op jobs with POST /jobs/batch, batch per
// request, from httpClients clients at once.
func postBatches(ctx context.Context, hc *http.Client, base string, n, batch int) error {
	body := []byte(`{"jobs": [` + strings.TrimSuffix(strings.Repeat(`{"type": "`+noopType+`"},`, batch), ",") + `]}`)
	requests := make(chan []byte)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(requests)
		for done := 0; done < n; done += batch {
			b := body
			if k := n - done; k < batch {
				b = []byte(`{"jobs": [` + strings.TrimSuffix(strings.Repeat(`{"type": "`+noopType+`"},`, k), ",") + `]}`)
			}
			select {
			case requests <- b:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range httpClients {
		g.Go(func() error {
			for b := range requests {
				if err := post(gctx, hc, base+"/jobs/batch", b); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

func post(ctx context.Context, hc *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("post batch: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("post batch: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("post batch: %s: %s", resp.Status, msg)
	}
	return nil
}
