package web_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
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
// another site cannot frame the dashboard: when the frame has loaded (its
// load event comes after the scripts of a page that loads), the
// dashboard's script was never fetched for it, so no button of it lies
// under the other site's clicks. The frame reaches sked through a proxy
// that counts those fetches; the same page opened on its own fetches the
// script through it, which shows that the count would see a framed one.
func TestDashboard_OtherSitesCannotFrameIt(t *testing.T) {
	browser := chromiumOrSkip(t)
	base, api := startServer(t, "")
	id := api.create(t, map[string]any{"type": "t", "runAt": "2030-01-01T00:00:00Z"})
	to, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(to)
	var scripts atomic.Int64 // GET /ui/app.js: the dashboard's page runs
	counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ui/app.js" {
			scripts.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(counted.Close)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, strings.NewReplacer("SKED", counted.URL, "JOB", id).Replace(framingPage))
	}))
	t.Cleanup(evil.Close)
	_, evilPort, _ := net.SplitHostPort(strings.TrimPrefix(evil.URL, "http://"))

	// localhost is another site than 127.0.0.1, where sked is.
	b := openBrowser(t, browser, "http://localhost:"+evilPort+"/")
	b.wait(`window.framed`)
	if n := scripts.Load(); n != 0 {
		t.Errorf("a page of another site framed the dashboard: its script was fetched %d times for the frame", n)
	}

	b.do(chromedp.Navigate(counted.URL + "/#/jobs/" + id))
	b.wait(`document.querySelector('button.act-cancel')`)
	if scripts.Load() == 0 {
		t.Fatal("the dashboard opened on its own fetched no script through the proxy; the count above proves nothing")
	}
}
