package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/handlers"
	"github.com/sked-dev/sked/internal/testneeds"
	"github.com/sked-dev/sked/server"
	"github.com/sked-dev/sked/web"
)

// TestDashboard_EndToEnd drives the dashboard in headless Chromium against a
// real server: it creates a recurring job in the form (the live cron check
// refuses a bad expression and shows the next times of a good one), watches
// its runs appear, cancels it, sees the honest 409 when cancelling a job a
// worker holds and stops that run instead, and retries a dead job from the
// dead-letter list. Set SKED_SCREENSHOT_DIR to keep screenshots of the pages.
func TestDashboard_EndToEnd(t *testing.T) {
	browser := chromiumOrSkip(t)
	base, api := startServer(t, "")
	b := openBrowser(t, browser, base+"/#/new")

	t.Run("CreateRecurringWithLiveCheck", func(t *testing.T) {
		b.t = t
		b.do(chromedp.WaitVisible(chromedp.CSS("#create-form")))
		b.do(chromedp.SendKeys(chromedp.CSS("#f-schedule"), "61 * * * *"))
		got := b.wait(`document.querySelector('#schedule-check.invalid')?.textContent`)
		if !strings.Contains(got, "not a cron expression") {
			t.Errorf("live check of a bad schedule shows %q, want the parser's message", got)
		}
		b.fill("#f-schedule", "*/2 * * * * *")
		b.fill("#f-timezone", "Europe/Berlin")
		n := b.wait(`document.querySelectorAll('#schedule-check.valid li').length === 5 && document.querySelector('#schedule-check').textContent`)
		if !strings.Contains(n, "valid") || !strings.Contains(n, "+01:00") && !strings.Contains(n, "+02:00") {
			t.Errorf("live check of a good schedule shows %q, want five times in Europe/Berlin", n)
		}
		b.screenshot("new")
		b.fill("#f-payload", fmt.Sprintf(`{"url": %q}`, api.ok))
		b.do(chromedp.Click(chromedp.CSS("#create-submit")))
		id := b.wait(`(location.hash.match(/^#\/jobs\/([^/?]+)$/) || [])[1]`)
		if sched := b.wait(`document.querySelector('#job-schedule')?.textContent`); sched != "*/2 * * * * *" {
			t.Errorf("job page shows schedule %q", sched)
		}
		b.wait(`document.querySelectorAll('#job-preview li').length === 5 && 'ok'`)
		b.wait(`document.querySelector('#runs li.run[data-outcome=succeeded]') && 'ok'`)
		b.screenshot("job")

		// A recurring job may be between claim and finish when clicked:
		// then the page shows the 409, and a later click succeeds.
		for i := 0; ; i++ {
			b.do(chromedp.Click(chromedp.CSS(`button[data-action=cancel]`)))
			b.do(chromedp.Click(chromedp.CSS(`button[data-action=cancel-confirm]`))) // it asks first
			msg := b.wait(`(t => t && !t.endsWith('…') && !t.includes('cannot be undone') && t)(document.querySelector('#action-msg')?.textContent)`)
			if msg == "Job cancelled." {
				break
			}
			if !strings.Contains(msg, "409") || i == 10 {
				t.Fatalf("cancel of job %s shows %q", id, msg)
			}
		}
		b.wait(`document.querySelector('#job-head .badge')?.textContent === 'cancelled' && 'ok'`)
		b.wait(`document.querySelector('#job-preview')?.textContent.includes('will not fire') && 'ok'`)
	})

	t.Run("CancelRunningShows409", func(t *testing.T) {
		b.t = t
		id := api.create(t, map[string]any{"type": "http", "payload": map[string]any{"url": api.slow}, "timeout": "60s"})
		select {
		case <-api.slowStarted:
		case <-time.After(30 * time.Second):
			t.Fatal("the slow job did not start within 30s")
		}
		b.do(chromedp.Navigate(base + "/#/jobs/" + id))
		b.wait(`document.querySelector('#job-head .badge')?.textContent === 'running' && 'ok'`)
		b.do(chromedp.Click(chromedp.CSS(`button[data-action=cancel]`)))
		b.do(chromedp.Click(chromedp.CSS(`button[data-action=cancel-confirm]`)))
		msg := b.wait(`document.querySelector('#action-msg .problem')?.textContent`)
		for _, want := range []string{"409", "running on worker", "cancel-run"} {
			if !strings.Contains(msg, want) {
				t.Errorf("cancel of a running job shows %q, want it to contain %q", msg, want)
			}
		}
		b.do(chromedp.Click(chromedp.CSS(`button[data-action=cancel-run]`)))
		b.wait(`document.querySelector('#action-msg')?.textContent.includes('asked to stop') && 'ok'`)
		b.wait(`document.querySelector('#runs li.run[data-outcome=cancelled]') && 'ok'`)
	})

	t.Run("RetryDeadLetter", func(t *testing.T) {
		b.t = t
		id := api.create(t, map[string]any{"type": "http", "payload": map[string]any{"url": api.bad}, "maxAttempts": 1})
		b.do(chromedp.Navigate(base + "/#/dead"))
		row := fmt.Sprintf(`#job-list tr[data-job=%q]`, id)
		b.wait(fmt.Sprintf(`document.querySelector('%s') && 'ok'`, row))
		b.screenshot("dead")
		b.do(chromedp.Click(chromedp.CSS(row + " button.retry")))
		msg := b.wait(`document.querySelector('#action-msg')?.textContent`)
		if want := "Job " + id + " is ready again."; msg != want {
			t.Errorf("retry shows %q, want %q", msg, want)
		}
		// It runs again, fails again and is back in the list with two runs.
		b.do(chromedp.Navigate(base + "/#/jobs/" + id))
		b.wait(`document.querySelectorAll('#runs li.run[data-outcome=failed]').length === 2 && 'ok'`)
		b.wait(`document.querySelector('#job-head .badge')?.textContent === 'dead' && 'ok'`)
	})

	t.Run("OverviewCountsAndCharts", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(base + "/#/"))
		b.wait(`document.querySelector('#counts [data-state=cancelled] .n')?.textContent === '2' && 'ok'`)
		b.wait(`document.querySelector('#counts [data-state=dead] .n')?.textContent === '1' && 'ok'`)
		b.wait(`document.querySelectorAll('#charts svg.chart').length === 3 && 'ok'`)
		b.wait(`/^\d+ failing, \d+ quiet schedules$/.test(document.querySelector('#schedule-health')?.textContent) && 'ok'`)
		// A job of a type no worker serves waits; its type's row says so
		// and links to its ready jobs.
		api.create(t, map[string]any{"type": "e2e-unserved"})
		row := `#due-types tr[data-type="e2e-unserved"]`
		b.wait(fmt.Sprintf(`document.querySelector('%s td:nth-child(2)')?.textContent === '1' && 'ok'`, row))
		b.wait(fmt.Sprintf(`document.querySelector('%s td:nth-child(4)')?.textContent === '0' && 'ok'`, row))
		b.do(chromedp.Click(chromedp.CSS(row + " a")))
		b.wait(`location.hash === '#/jobs?state=ready&type=e2e-unserved' && 'ok'`)
		b.wait(`document.querySelectorAll('#job-list tr[data-job]').length === 1 && 'ok'`)
		b.do(chromedp.Navigate(base + "/#/"))
		b.wait(`document.querySelector('#due-types tr[data-type]') && 'ok'`)
		b.screenshot("overview")
	})
}

// TestDashboard_AsksForToken checks that against a server with a token the
// page loads, asks for the token when the API answers 401, and then shows
// the data.
func TestDashboard_AsksForToken(t *testing.T) {
	browser := chromiumOrSkip(t)
	base, api := startServer(t, "s3cret")
	api.create(t, map[string]any{"type": "t", "runAt": "2030-01-01T00:00:00Z"})
	b := openBrowser(t, browser, base+"/#/")
	b.wait(`document.querySelector('#token-dialog')?.open && 'ok'`)
	// Behind the prompt the page does not claim to be live.
	if got := b.wait(`document.querySelector('#live').textContent`); got != "needs a token" {
		t.Errorf("behind the token prompt the live indicator says %q", got)
	}
	// Escape closes the prompt; the page asks again rather than hang.
	b.wait(`(window.closes = 0, document.querySelector('#token-dialog').addEventListener('close', () => window.closes++), 'ok')`)
	b.do(chromedp.KeyEvent(kb.Escape))
	b.wait(`window.closes > 0 && document.querySelector('#token-dialog').open && 'ok'`)
	b.do(chromedp.SendKeys(chromedp.CSS("#token-input"), "wrong"))
	b.do(chromedp.Click(chromedp.CSS("#token-form button[type=submit]")))
	if got := b.wait(`document.querySelector('#token-dialog')?.open && document.querySelector('#token-error').textContent`); !strings.Contains(got, "refused") {
		t.Errorf("after a wrong token the dialog shows %q", got)
	}
	b.do(chromedp.SendKeys(chromedp.CSS("#token-input"), "s3cret"))
	b.do(chromedp.Click(chromedp.CSS("#token-form button[type=submit]")))
	b.wait(`document.querySelector('#counts [data-state=ready] .n')?.textContent === '1' && 'ok'`)
	b.wait(`document.querySelector('#live').textContent === 'live' && 'ok'`)
	if got := b.wait(`sessionStorage.getItem('sked.token')`); got != "s3cret" {
		t.Errorf("sessionStorage keeps %q, want the token", got)
	}
	// "Forget token" removes it and loads the page again, which asks for one.
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS("#forget-token"))); err != nil {
		t.Fatalf("Forget token: %v", err)
	}
	b.wait(`document.querySelector('#token-dialog')?.open && 'ok'`)
	if got := b.wait(`String(sessionStorage.getItem('sked.token'))`); got != "null" {
		t.Errorf("after Forget token sessionStorage keeps %q, want none", got)
	}
	if got := b.wait(`String(document.querySelector('#forget-token').hidden)`); got != "true" {
		t.Errorf("with no token kept, Forget token hidden: %s, want true", got)
	}
}

// TestDashboard_ReadTokenLeavesOutChanges checks in Chromium that with a
// read token the dashboard shows no control that would answer 403 (a job's
// actions and edit form, "New job", the list's selection and bulk
// actions), and says why.
func TestDashboard_ReadTokenLeavesOutChanges(t *testing.T) {
	browser := chromiumOrSkip(t)
	base, api := startServer(t, "s3cret", func(c *server.Config) { c.ReadTokens = []string{"look"} })
	id := api.create(t, map[string]any{"type": "t", "schedule": "0 3 * * *"})
	b := openBrowser(t, browser, base+"/#/jobs/"+id)
	b.wait(`document.querySelector('#token-dialog')?.open && 'ok'`)
	b.do(chromedp.SendKeys(chromedp.CSS("#token-input"), "look"))
	b.do(chromedp.Click(chromedp.CSS("#token-form button[type=submit]")))
	b.wait(`document.querySelector('#job-fields dl') && 'ok'`)
	shown := func(sel string) string {
		return b.wait(`(() => { const e = document.querySelector(` + strconv.Quote(sel) + `);
			return e ? String(e.getClientRects().length > 0) : 'missing'; })()`)
	}
	for sel, want := range map[string]string{
		"#job-actions": "false", "#edit-job": "false", `nav a[data-nav="new"]`: "false",
		".job-page .read-only-note": "true", "#job-fields": "true",
	} {
		if got := shown(sel); got != want {
			t.Errorf("with a read token, %s shown: %s, want %s", sel, got, want)
		}
	}
	b.do(chromedp.Navigate(base + "/#/jobs"))
	b.wait(`document.querySelector('table.jobs tbody tr') && 'ok'`)
	for sel, want := range map[string]string{"div.bulk": "false", "td.pick": "false", "p.read-only-note": "true"} {
		if got := shown(sel); got != want {
			t.Errorf("with a read token, the list's %s shown: %s, want %s", sel, got, want)
		}
	}
}

// attackPage is a page of another site that tries, without CORS, every way a
// page can make a browser send a state-changing request to sked: fetch in
// no-cors mode with an untyped Blob and with text, a pause with no body, a
// form post in text/plain shaped as JSON, and a JSON fetch that needs a
// preflight. SKED is replaced by sked's base URL and JOB by a job's id. It
// sets window.attackDone to what each attempt got when all have ended.
const attackPage = `<!doctype html>
<meta charset="utf-8">
<title>another site</title>
<iframe name="sink" id="sink"></iframe>
<form id="form" method="post" enctype="text/plain" target="sink" action="SKED/jobs">
  <input type="hidden" name='{"type": "evil", "via": "form", "pad": "' value='"}'>
</form>
<script>
const job = JSON.stringify({type: "evil"});
async function attempt(name, path, init) {
  try { await fetch("SKED" + path, init); return name + ": answered"; }
  catch (e) { return name + ": " + e.message; }
}
(async () => {
  const results = [
    await attempt("no-cors blob", "/jobs", {method: "POST", mode: "no-cors", body: new Blob([job])}),
    await attempt("no-cors text", "/jobs", {method: "POST", mode: "no-cors", body: job}),
    await attempt("no-cors batch", "/jobs/batch", {method: "POST", mode: "no-cors", body: new Blob(['{"jobs": [' + job + ']}'])}),
    await attempt("no-cors pause", "/jobs/JOB/pause", {method: "POST", mode: "no-cors"}),
    await attempt("cors json", "/jobs", {method: "POST", headers: {"Content-Type": "application/json"}, body: job}),
  ];
  await new Promise((resolve) => {
    document.getElementById("sink").addEventListener("load", resolve, {once: true});
    document.getElementById("form").submit();
  });
  results.push("form: loaded");
  window.attackDone = results.join("; ");
})();
</script>`

// TestDashboard_OtherOriginsCannotChangeJobs checks in Chromium that web
// pages cannot use a sked without a token: a page of another site (another
// host and port) tries every request a page can send without CORS, and a
// page under a DNS name rebound to 127.0.0.1 (DNS rebinding: its fetches
// are same-origin and reach sked) tries a JSON fetch. Afterwards no job was
// created and the one job is not paused.
func TestDashboard_OtherOriginsCannotChangeJobs(t *testing.T) {
	browser := chromiumOrSkip(t)
	base, api := startServer(t, "")
	id := api.create(t, map[string]any{"type": "t", "runAt": "2030-01-01T00:00:00Z"})
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, strings.NewReplacer("SKED", base, "JOB", id).Replace(attackPage))
	}))
	t.Cleanup(evil.Close)
	_, evilPort, _ := net.SplitHostPort(strings.TrimPrefix(evil.URL, "http://"))
	_, skedPort, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))

	// localhost is another site than 127.0.0.1, where sked is.
	b := openBrowser(t, browser, "http://localhost:"+evilPort+"/",
		chromedp.Flag("host-resolver-rules", "MAP rebound.test 127.0.0.1"))
	got := b.wait(`window.attackDone`)
	t.Logf("another site's attempts: %s", got)
	if !strings.Contains(got, "no-cors blob: answered") || !strings.Contains(got, "form: loaded") {
		t.Errorf("the attempts did not reach sked (%s); the test proves nothing", got)
	}

	b.do(chromedp.Navigate("http://rebound.test:" + skedPort + "/"))
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`fetch("/jobs", {method: "POST",
		headers: {"Content-Type": "application/json"}, body: JSON.stringify({type: "evil"})})
		.then((r) => { window.rebound = "status " + r.status; }, (e) => { window.rebound = e.message; }); 0`)); err != nil {
		t.Fatalf("fetch from the rebound page: %v", err)
	}
	if got := b.wait(`window.rebound`); got != "status 403" {
		t.Errorf("a JSON fetch under a rebound DNS name got %q, want status 403", got)
	}

	jobs, _, err := (&client.Client{BaseURL: base}).JobList(context.Background(), db.JobListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].ID != id || jobs[0].State != db.StateReady {
		t.Errorf("after the attempts the jobs are %+v; want only job %s, still ready", jobs, id)
	}
}

// openBrowser starts headless Chromium (the binary browser), with the extra
// options, on url for the rest of the test.
func openBrowser(t *testing.T, browser, url string, extra ...chromedp.ExecAllocatorOption) *page {
	t.Helper()
	opts := append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(browser), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 1000),
	}, extra...)
	// The first Run starts the browser; it must not carry a deadline. A
	// browser that exits as it starts, before it listens (seen once on a
	// loaded machine, printing nothing but its crash reporter's noise), is
	// started once more: that is the machine's, not the dashboard's.
	for try := 1; ; try++ {
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(opts, chromedp.UserDataDir(t.TempDir()))...)
		ctx, cancelTab := chromedp.NewContext(allocCtx)
		t.Cleanup(func() {
			cancelTab()
			cancelAlloc()
		})
		err := chromedp.Do(ctx, chromedp.Navigate(url))
		switch {
		case err == nil:
			return &page{t: t, ctx: ctx}
		case try == 1 && strings.Contains(err.Error(), "chrome failed to start"):
			t.Logf("chromium did not start, starting it again: %v", err)
		default:
			t.Fatalf("open the dashboard in chromium: %v", err)
		}
	}
}

// page drives one browser tab; every wait is bounded.
type page struct {
	t   *testing.T
	ctx context.Context
}

func (p *page) do(a chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, a); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// fill empties the input sel and types text into it, as a person would.
func (p *page) fill(sel, text string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](fmt.Sprintf(`document.querySelector(%q).value = ""`, sel))); err != nil {
		p.t.Fatalf("clear %s: %v", sel, err)
	}
	p.do(chromedp.SendKeys(chromedp.CSS(sel), text))
}

// wait polls the JavaScript expression until it is truthy (30 s at most) and
// returns its value as text.
func (p *page) wait(expr string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 35*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Poll[any](expr,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		shown, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash + "\n" + document.querySelector('main').innerText`))
		p.t.Fatalf("waiting for %s: %v\npage shows:\n%s", expr, err, shown)
	}
	return fmt.Sprint(v)
}

// screenshot saves the page to $SKED_SCREENSHOT_DIR/name.png when it is set.
func (p *page) screenshot(name string) {
	dir := os.Getenv("SKED_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	}
	if err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
	}
}

// chromiumOrSkip returns the path of a Chromium binary, or skips the test.
func chromiumOrSkip(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testneeds.Skip(t, testneeds.Chromium, "no chromium, chromium-browser or google-chrome on PATH")
	return ""
}

// targets are the local endpoints the test's http jobs call.
type targets struct {
	base        string
	token       string        // sent on API calls when set
	ok, bad     string        // answer 200 and 400
	slow        string        // answers when the request is cancelled
	slowStarted chan struct{} // receives once per slow request
}

// create posts a job and returns its id.
func (a *targets) create(t *testing.T, job map[string]any) string {
	t.Helper()
	body, _ := json.Marshal(job)
	req, _ := http.NewRequest(http.MethodPost, a.base+"/jobs", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("create job: %v", err)
	}
	defer resp.Body.Close()
	var got struct {
		JobID  string `json:"jobId"`
		Detail string `json:"detail"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create job: %d %s (%v)", resp.StatusCode, got.Detail, err)
	}
	return got.JobID
}

// startServer runs a sked server on a temporary database (with token, if
// not empty) and the targets its jobs call, all on 127.0.0.1, until the
// test ends.
func startServer(t *testing.T, token string, configure ...func(*server.Config)) (string, *targets) {
	t.Helper()
	a := &targets{token: token, slowStarted: make(chan struct{}, 10)}
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/bad", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "this target refuses every request", http.StatusBadRequest)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		a.slowStarted <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	target := httptest.NewServer(mux)
	a.ok, a.bad, a.slow = target.URL+"/ok", target.URL+"/bad", target.URL+"/slow"

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg := server.Config{
		DB: filepath.Join(t.TempDir(), "sked.db"), Listener: ln, AllowPrivateTargets: true,
		Workers: 4, Lease: 3 * time.Second, Grace: 2 * time.Second,
	}
	if token != "" {
		cfg.Tokens = []string{token}
	}
	for _, c := range configure {
		c(&cfg)
	}
	srv := server.New(cfg)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		close(release)
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("server: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("server did not stop within 30s")
		}
		target.Close()
	})
	a.base = "http://" + ln.Addr().String()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(a.base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not answer GET /stats within 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return a.base, a
}

// TestDashboard_RetryAfterAsTime: the page says when to try again as the
// time Retry-After gives ("retry after 5s"), not as the header, which its
// user does not see: the API on a real PostgreSQL store cut off from it
// answers 503 with Retry-After and a detail naming the header.
func TestDashboard_RetryAfterAsTime(t *testing.T) {
	browser := chromiumOrSkip(t)
	u := postgrestest.URL(t)
	proxy := postgrestest.NewProxy(t, u)
	api := handlers.New(handlers.Config{Store: postgrestest.OpenURL(t, proxy.URL(u))})
	srv := httptest.NewServer(web.Mount(api))
	t.Cleanup(srv.Close)
	proxy.Cut()
	b := openBrowser(t, browser, srv.URL+"/#/jobs") // it reads GET /jobs alone
	said := b.wait(`document.querySelector('#live').textContent === 'offline' && document.querySelector('#live').title`)
	if !strings.Contains(said, "retry after 5s") || strings.Contains(said, "Retry-After") {
		t.Errorf("the page says %q; want it to say to retry after 5s, without the header's name", said)
	}
}

// TestDashboard_LateOutcome: a run whose worker froze past its lease and
// reported after the reaper took the job back shows what it reported, as
// sked runs does: it ended lease_expired, and was reported failed late.
func TestDashboard_LateOutcome(t *testing.T) {
	browser := chromiumOrSkip(t)
	s := sqlitetest.Open(t)
	ctx := context.Background()
	j, _, err := s.JobCreate(ctx, db.JobCreateParams{Type: "thumb"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.RunClaim(ctx, db.RunClaimParams{WorkerID: "w", Types: []string{"thumb"}, Max: 1, Lease: time.Second})
	if err != nil || len(c) != 1 {
		t.Fatalf("claim: %v, %v", c, err)
	}
	s.NowFunc = func() time.Time { return time.Now().Add(time.Hour) } // past the lease
	if n, err := s.RunReapExpired(ctx); err != nil || n != 1 {
		t.Fatalf("reap: %d, %v", n, err)
	}
	if _, err := s.RunFinish(ctx, db.RunFinishParams{JobID: j.ID, Generation: c[0].Job.LeaseGeneration,
		Outcome: db.OutcomeFailed, Error: "stopped: lease lost"}); !errors.Is(err, db.ErrStale) {
		t.Fatalf("late report: %v, want ErrStale", err)
	}
	srv := httptest.NewServer(web.Mount(handlers.New(handlers.Config{Store: s})))
	t.Cleanup(srv.Close)
	b := openBrowser(t, browser, srv.URL+"/#/jobs/"+j.ID)
	said := b.wait(`document.querySelector('#runs li.run[data-outcome=lease_expired] .late')?.textContent`)
	if !strings.HasPrefix(said, "reported failed late ") || !strings.HasSuffix(said, ": stopped: lease lost") {
		t.Errorf("the run reaped, then reported, shows %q; want what it reported late", said)
	}
}
