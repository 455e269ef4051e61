package web_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/server"
)

// framingPage is a page of another site that lays the dashboard's page of
// job JOB, nearly transparent, over its whole window, so that its user's
// clicks land on the dashboard's buttons (clickjacking). It sets
// window.framed when the frame has loaded.
const framingPage = `<!doctype html>
<meta charset="utf-8">
<title>win a prize</title>
<style>body { margin: 0 } iframe { position: fixed; left: 0; top: 0; width: 100vw; height: 100vh; border: 0; opacity: 0.01 }</style>
<p>Click anywhere to claim your prize</p>
<iframe src="SKED/#/jobs/JOB" onload="window.framed = 'loaded'"></iframe>`

// TestDashboard_OtherSitesCannotFrameIt checks in Chromium that a page of
// another site cannot frame the dashboard: when the frame has loaded, the
// dashboard's script was never fetched for it. Were it framed, the test
// goes on to show what that allows: a click on the framing page cancels a
// job through the dashboard's "Cancel job" button.
func TestDashboard_OtherSitesCannotFrameIt(t *testing.T) {
	browser := chromiumOrSkip(t)
	var scripts atomic.Int64 // GET ui/app.js: the dashboard's page runs
	base, c := serveCounting(t, func(r *http.Request) {
		if r.URL.Path == "/ui/app.js" {
			scripts.Add(1)
		}
	})
	id := (&targets{base: base}).create(t, map[string]any{"type": "t", "runAt": "2030-01-01T00:00:00Z"})
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, strings.NewReplacer("SKED", base, "JOB", id).Replace(framingPage))
	}))
	t.Cleanup(evil.Close)
	_, evilPort, _ := net.SplitHostPort(strings.TrimPrefix(evil.URL, "http://"))

	// Where the button is when the page is the whole window, as it is in
	// the frame.
	b := openBrowser(t, browser, base+"/#/jobs/"+id)
	at := b.wait(`(() => { const r = document.querySelector('button.act-cancel')?.getBoundingClientRect();
		return r && (r.x + r.width / 2) + "," + (r.y + r.height / 2); })()`)
	before := scripts.Load()

	// localhost is another site than 127.0.0.1, where sked is.
	b.do(chromedp.Navigate("http://localhost:" + evilPort + "/"))
	b.wait(`window.framed`)
	if scripts.Load() == before {
		return // the frame was refused before its page ran
	}
	x, y, _ := strings.Cut(at, ",")
	fx, _ := strconv.ParseFloat(x, 64)
	fy, _ := strconv.ParseFloat(y, 64)
	state := db.StateReady
	for deadline := time.Now().Add(30 * time.Second); state != db.StateCancelled && time.Now().Before(deadline); {
		b.do(chromedp.MouseClickXY(fx, fy))
		j, err := c.JobGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		state = j.State
	}
	t.Errorf("a page of another site framed the dashboard; a click on that page at (%s) left job %s %s", at, id, state)
}

// serveCounting runs sked (API and dashboard) on 127.0.0.1 with saw called
// on every request, and returns its base URL and a client of it.
func serveCounting(t *testing.T, saw func(*http.Request)) (string, *client.Client) {
	t.Helper()
	srv := server.New(server.Config{DB: filepath.Join(t.TempDir(), "sked.db"), Grace: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		saw(r)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		web.Close()
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("server: %v", err)
		}
	})
	return web.URL, &client.Client{BaseURL: web.URL}
}
