package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/handlers"
	"github.com/sked-dev/sked/web"
)

// browserZone is the timezone Chromium runs in, so that the page's times
// name a zone other than the jobs' own.
const browserZone = "America/New_York"

// TestDashboard_WorkingWithJobs drives, in headless Chromium against a real
// server, what an operator does with named jobs: finds them by name, key,
// id or type and sorts them; retries and cancels a selection and reads
// what was refused and why; on a job's page edits it (a validation error
// shown at its field, then a change sent as a merge patch of the changed
// fields alone, which its timeline then shows), pauses it with a reason
// and an end, resumes, runs, skips and backfills it; follows a running
// run's output until it ends; and sees which worker holds what. Set
// SKED_SCREENSHOT_DIR to keep screenshots at 1440x900.
func TestDashboard_WorkingWithJobs(t *testing.T) {
	browser := chromiumOrSkip(t)
	base, api := startServer(t, "")
	backup := api.create(t, map[string]any{"name": "nightly-backup", "type": "http", "payload": map[string]any{"url": api.ok},
		"schedule": "0 3 * * *", "timezone": "Europe/Berlin", "idempotencyKey": "backup-key-1"})
	api.create(t, map[string]any{"name": "hourly-report", "type": "report", "schedule": "@hourly"})
	cert := api.create(t, map[string]any{"name": "cert-renew", "type": "http", "payload": map[string]any{"url": api.ok}, "runAt": "2030-01-01T00:00:00Z"})
	flaky := api.create(t, map[string]any{"name": "flaky-hook", "type": "http", "payload": map[string]any{"url": api.bad}, "maxAttempts": 1})
	unnamed := api.create(t, map[string]any{"type": "t", "runAt": "2030-01-01T00:00:00Z"})
	b := openBrowser(t, browser, base+"/#/jobs", chromedp.Env("TZ="+browserZone))
	b.do(chromedp.EmulateViewport(1440, 900))
	reqs := b.recordRequests()
	rows := `[...document.querySelectorAll('#job-list tbody tr')].map((r) => r.querySelector('.job-name')?.textContent || r.dataset.job).join(',')`

	t.Run("NamesFirstSearchAndSort", func(t *testing.T) {
		b.t = t
		b.wait(`document.querySelectorAll('#job-list tbody tr').length === 5 && 'ok'`)
		got := b.wait(fmt.Sprintf(`(r => r.querySelector('.job-name').textContent + ' ' + r.querySelector('.job-id').textContent)(document.querySelector('#job-list tr[data-job=%q]'))`, backup))
		if got != "nightly-backup "+backup {
			t.Errorf("the row of nightly-backup shows %q, want its name, then its id", got)
		}
		if got := b.wait(fmt.Sprintf(`document.querySelector('#job-list tr[data-job=%q] a.job-link').textContent`, unnamed)); got != unnamed {
			t.Errorf("the row of a job without a name links %q, want its id", got)
		}
		for _, c := range []struct {
			q    string
			want []string
		}{
			{"backup", []string{"nightly-backup"}},
			{"backup-key-1", []string{"nightly-backup"}}, // its idempotency key
			{cert, []string{"cert-renew"}},
			{"report", []string{"hourly-report"}}, // its type
			{"HTTP", []string{"cert-renew", "flaky-hook", "nightly-backup"}},
		} {
			b.setValue("#search", c.q)
			b.wait(fmt.Sprintf(`location.hash.includes('q=' + %q) && 'ok'`, c.q))
			got := strings.Split(b.wait(rows), ",")
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("search %q shows %v, want %v", c.q, got, c.want)
			}
		}

		b.setValue("#search", "")
		b.wait(`!location.hash.includes('q=') && document.querySelectorAll('#job-list tbody tr').length === 5 && 'ok'`)
		b.click(`button.sort[data-sort=name]`)
		b.wait(`location.hash.includes('sort=name') && 'ok'`)
		if got, want := b.wait(rows), "cert-renew,flaky-hook,hourly-report,nightly-backup,"+unnamed; got != want {
			t.Errorf("sorted by name: %s, want %s", got, want)
		}
		b.click(`button.sort[data-sort=name]`)
		b.wait(`document.querySelector('button.sort[data-sort=name]').closest('th').getAttribute('aria-sort') === 'descending' && 'ok'`)
		if got, want := b.wait(rows), unnamed+",nightly-backup,hourly-report,flaky-hook,cert-renew"; got != want {
			t.Errorf("sorted by name, descending: %s, want %s", got, want)
		}
		b.screenshot("jobs")

		// An exact name beyond the jobs loaded (here: not dead) is looked up.
		b.do(chromedp.Navigate(base + "/#/dead?q=hourly-report"))
		if got := b.wait(`document.querySelector('#search-found a')?.textContent`); got != "hourly-report" {
			t.Errorf("the dead letters searched for hourly-report find %q beyond the list", got)
		}
	})

	t.Run("BulkRetryAndCancel", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(base + "/#/jobs"))
		b.wait(fmt.Sprintf(`document.querySelector('#job-list tr[data-job=%q] .badge')?.textContent === 'dead' && 'ok'`, flaky))
		b.click(fmt.Sprintf(`#job-list tr[data-job=%q] input.select`, flaky))
		b.click(fmt.Sprintf(`#job-list tr[data-job=%q] input.select`, cert))
		if got := b.wait(`document.querySelector('#bulk-count').textContent`); got != "2 selected" {
			t.Errorf("after checking two jobs the bar says %q", got)
		}
		b.click(`#bulk-retry`)
		b.click(`#bulk-go`)
		got := b.wait(`(t => !t.endsWith('…') && t)(document.querySelector('#bulk-summary').textContent)`)
		if !strings.HasPrefix(got, "1 of 2 ready again; 1 refused:") {
			t.Errorf("bulk retry of a dead and a ready job says %q", got)
		}
		refused := b.wait(fmt.Sprintf(`document.querySelector('#bulk-summary li[data-job=%q]')?.textContent`, cert))
		for _, want := range []string{"cert-renew", "409", "only dead jobs can be retried"} {
			if !strings.Contains(refused, want) {
				t.Errorf("the refusal of cert-renew reads %q, want it to contain %q", refused, want)
			}
		}
		if got := b.wait(`document.querySelector('#bulk-count').textContent`); got != "none selected" {
			t.Errorf("after the bulk action the bar says %q", got)
		}

		b.click(fmt.Sprintf(`#job-list tr[data-job=%q] input.select`, cert))
		b.click(fmt.Sprintf(`#job-list tr[data-job=%q] input.select`, unnamed))
		b.click(`#bulk-cancel`)
		b.click(`#bulk-go`)
		if got := b.wait(`(t => !t.endsWith('…') && t)(document.querySelector('#bulk-summary').textContent)`); got != "2 of 2 cancelled." {
			t.Errorf("bulk cancel says %q", got)
		}
		for _, id := range []string{cert, unnamed} {
			b.wait(fmt.Sprintf(`document.querySelector('#job-list tr[data-job=%q] .badge')?.textContent === 'cancelled' && 'ok'`, id))
		}
	})

	t.Run("EditPauseRunSkipBackfill", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(base + "/#/jobs/nightly-backup")) // by name
		if got := b.wait(`(n => n && n.textContent + ' ' + document.querySelector('#job-id').textContent)(document.querySelector('#job-name'))`); got != "nightly-backup "+backup {
			t.Errorf("the job page is headed %q, want its name, then its id", got)
		}
		next := b.wait(`(f => f && f.querySelector('.abs').textContent + ' | ' + f.querySelector('time').title)(document.querySelector('#job-next'))`)
		if !strings.Contains(next, "03:00:00 Europe/Berlin") || !strings.Contains(next, browserZone) {
			t.Errorf("next run shows %q, want 03:00 named in the job's zone beside it and in the browser's on hover", next)
		}
		if got := b.wait(`document.querySelector('#job-last-success')?.textContent`); !strings.Contains(got, "none yet") {
			t.Errorf("last success of a job that never ran: %q", got)
		}

		b.click(`#edit-job > summary`)
		b.setValue("#edit-schedule", "30 4 * * *")
		b.setValue("#edit-timeout", "soon")
		b.click(`#edit-save`)
		if got := b.wait(`(e => !e.hidden && e.textContent)(document.querySelector('#err-timeout'))`); !strings.Contains(got, `"soon" is not a duration`) {
			t.Errorf("the timeout field's error reads %q", got)
		}
		b.screenshot("edit")
		b.setValue("#edit-timeout", "2m")
		b.click(`#edit-save`)
		if got := b.wait(`(t => t.startsWith('Saved') && t)(document.querySelector('#action-msg').textContent)`); got != "Saved: schedule, timeout changed." {
			t.Errorf("after saving the page says %q", got)
		}
		patch := reqs.last("PATCH")
		if patch.body != `{"schedule":"30 4 * * *","timeout":"2m"}` || patch.contentType != "application/merge-patch+json" {
			t.Errorf("the edit sent %s as %s, want a merge patch of the two changed fields", patch.body, patch.contentType)
		}
		b.wait(`document.querySelector('#job-schedule')?.textContent === '30 4 * * *' && 'ok'`)
		ev := b.wait(`(e => e && [...e.querySelectorAll('li[data-field]')].map((f) => f.dataset.field + '=' + f.querySelector('.to').textContent).join(',') + ' | ' + e.querySelector('.actor').textContent.trim())(document.querySelector('#events li.event[data-kind=changed]'))`)
		if !strings.HasPrefix(ev, "schedule=30 4 * * *,timeout=2m0s | by dashboard") {
			t.Errorf("the timeline's change reads %q, want the two fields and the dashboard as actor", ev)
		}
		b.screenshot("job")

		b.click(`#pause-form > summary`)
		b.setValue("#pause-reason", "disk swap")
		b.setValue("#pause-until", "2030-06-01T12:00:00")
		b.click(`button[data-action=pause]`)
		b.wait(`document.querySelector('#job-head .badge')?.textContent === 'paused' && 'ok'`)
		paused := b.wait(`(f => f && f.textContent + ' | ' + f.querySelector('time')?.title)(document.querySelector('#job-paused'))`)
		for _, want := range []string{"disk swap", "resumes", "2030-06-01 18:00:00 Europe/Berlin", "2030-06-01 12:00:00 " + browserZone} {
			if !strings.Contains(paused, want) {
				t.Errorf("the pause reads %q, want it to contain %q", paused, want)
			}
		}
		b.click(`button[data-action=resume]`)
		b.wait(`document.querySelector('#job-head .badge')?.textContent === 'ready' && 'ok'`)

		b.click(`button[data-action=trigger]`)
		b.wait(`document.querySelector('#runs li.run[data-outcome=succeeded]') && 'ok'`)
		b.wait(`document.querySelector('#job-last-success time') && 'ok'`)
		b.wait(`document.querySelector('#job-head .badge')?.textContent === 'ready' && 'ok'`)
		b.click(`button[data-action=skip]`)
		b.wait(`document.querySelector('#runs li.run[data-outcome=missed]')?.textContent.includes('skipped') && 'ok'`)

		b.click(`#backfill-form > summary`)
		b.eval(`(() => {
			const local = (ms) => new Date(ms - new Date(ms).getTimezoneOffset() * 60000).toISOString().slice(0, 19);
			document.querySelector('#backfill-from').value = local(Date.now() - 3 * 86400e3);
			document.querySelector('#backfill-to').value = local(Date.now() - 60e3);
		})()`)
		b.click(`button[data-action=backfill]`)
		msg := b.wait(`(t => t.startsWith('Backfill') && t)(document.querySelector('#action-msg').textContent)`)
		if !regexp.MustCompile(`^Backfill: [2-4] slots in the range, [2-4] new jobs\.$`).MatchString(msg) {
			t.Errorf("backfill of three days of a daily schedule says %q", msg)
		}
	})

	t.Run("WorkersAndLiveOutput", func(t *testing.T) {
		b.t = t
		id := api.create(t, map[string]any{"name": "long-export", "type": "remote-test"})
		var claim struct {
			Claims []struct {
				Generation int64 `json:"generation"`
			} `json:"claims"`
		}
		api.call(t, "POST", "/claims", `{"workerId": "box-7", "types": ["remote-test"], "lease": "2m", "wait": "10s"}`, &claim)
		if len(claim.Claims) != 1 {
			t.Fatalf("the remote worker claimed %d jobs, want long-export", len(claim.Claims))
		}
		slow := api.create(t, map[string]any{"name": "slow-sync", "type": "http", "payload": map[string]any{"url": api.slow}, "timeout": "60s"})
		select {
		case <-api.slowStarted:
		case <-time.After(30 * time.Second):
			t.Fatal("the slow job did not start within 30s")
		}

		b.do(chromedp.Navigate(base + "/#/workers"))
		remote := b.wait(`document.querySelector('#workers tr[data-worker="box-7"]')?.textContent`)
		for _, want := range []string{"remote", "long-export", id} {
			if !strings.Contains(remote, want) {
				t.Errorf("the row of worker box-7 reads %q, want it to contain %q", remote, want)
			}
		}
		if types := b.wait(`document.querySelector('#workers tr[data-worker="box-7"] td.types')?.textContent`); types != "remote-test" {
			t.Errorf("worker box-7's types read %q, want the type it claimed, remote-test", types)
		}
		pool := b.wait(fmt.Sprintf(`(li => li && li.closest('tr').textContent)(document.querySelector('#workers li[data-job=%q]'))`, slow))
		if !strings.HasPrefix(pool, "serve:") || !strings.Contains(pool, "in sked serve") || !strings.Contains(pool, "slow-sync") {
			t.Errorf("the row of the job slow-sync reads %q, want sked serve's own pool", pool)
		}
		b.screenshot("workers")
		api.call(t, "POST", "/jobs/"+slow+"/cancel-run", "", nil)

		b.do(chromedp.Navigate(base + "/#/jobs/" + id))
		if got := b.wait(`(s => s && s.dataset.live === 'on' && s.textContent)(document.querySelector('#live-output'))`); !strings.Contains(got, "worker box-7") {
			t.Errorf("the live output of the running run reads %q", got)
		}
		b.screenshot("live")
		tailReads := func() int { return reqs.count("GET", "/jobs/"+id+"/runs?limit=20") }
		until(t, "the tail reads the runs", func() bool { return tailReads() > 0 })
		api.call(t, "POST", "/jobs/"+id+"/complete", fmt.Sprintf(`{"generation": %d, "outcome": "succeeded", "output": "exported 1200 rows\nupload done"}`, claim.Claims[0].Generation), nil)
		if got := b.wait(`(s => s.dataset.live === 'ended' && document.querySelector('#live-tail').textContent)(document.querySelector('#live-output'))`); got != "exported 1200 rows\nupload done" {
			t.Errorf("after the run ended the tail shows %q", got)
		}
		// The tail has stopped reading while the page polls on.
		reads, polls := tailReads(), reqs.count("GET", "/jobs/"+id+"/events?limit=50")
		until(t, "the page polls twice more", func() bool { return reqs.count("GET", "/jobs/"+id+"/events?limit=50") >= polls+2 })
		if got := tailReads(); got != reads {
			t.Errorf("the tail read the runs %d more times after its run ended", got-reads)
		}
	})
}

// TestDashboard_UnderPrefix serves the API and the dashboard under /sked,
// as a program embedding sked mounts them in its own router, and checks
// that the page opened at /sked works (lists, a job's page, an edit, the
// workers, a new job) and that every request it sends stays under /sked.
func TestDashboard_UnderPrefix(t *testing.T) {
	browser := chromiumOrSkip(t)
	store := sqlitetest.Open(t)
	api := handlers.New(handlers.Config{Store: store})
	var mu sync.Mutex
	var outside []string
	mux := http.NewServeMux()
	mux.Handle("/sked/", http.StripPrefix("/sked", web.Mount(api)))
	mux.Handle("/sked", http.StripPrefix("/sked", web.Mount(api)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		outside = append(outside, r.Method+" "+r.URL.String())
		mu.Unlock()
		http.NotFound(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	base := "http://" + ln.Addr().String()
	id := (&targets{base: base + "/sked"}).create(t, map[string]any{"name": "prefixed", "type": "t", "schedule": "@daily"})

	b := openBrowser(t, browser, "about:blank")
	reqs := b.recordRequests()
	b.do(chromedp.Navigate(base + "/sked"))
	b.wait(`document.querySelector('#counts [data-state=ready] .n')?.textContent === '1' && 'ok'`)
	b.click(`nav a[data-nav=jobs]`)
	b.click(fmt.Sprintf(`#job-list tr[data-job=%q] a.job-link`, id))
	b.wait(`document.querySelector('#job-name')?.textContent === 'prefixed' && 'ok'`)
	b.click(`#edit-job > summary`)
	b.setValue("#edit-name", "prefixed-too")
	b.click(`#edit-save`)
	b.wait(`document.querySelector('#job-name')?.textContent === 'prefixed-too' && 'ok'`)
	b.click(`nav a[data-nav=workers]`)
	b.wait(`document.querySelector('#workers .empty') && 'ok'`)
	b.click(`nav a[data-nav=new]`)
	b.setValue("#f-schedule", "@hourly")
	b.wait(`document.querySelector('#schedule-check.valid') && 'ok'`)
	b.setValue("#f-type", "t")
	b.setValue("#f-payload", "{}")
	b.click(`#create-submit`)
	b.wait(`location.hash.match(/^#\/jobs\/[^/?]+$/) && !location.hash.includes(` + fmt.Sprintf("%q", id) + `) && document.querySelector('#job-head .badge') && 'ok'`)

	mu.Lock()
	defer mu.Unlock()
	if len(outside) > 0 {
		t.Errorf("requests outside /sked: %v", outside)
	}
	sent := reqs.all()
	for _, want := range []string{"GET /sked/stats", "GET /sked/jobs?", "PATCH /sked/jobs/", "GET /sked/workers", "POST /sked/schedules/check", "POST /sked/jobs"} {
		if !slices.ContainsFunc(sent, func(r string) bool { return strings.HasPrefix(r, want) }) {
			t.Errorf("the page sent no request %s…; it sent %v", want, sent)
		}
	}
	for _, r := range sent {
		if _, path, _ := strings.Cut(r, " "); path != "/sked" && !strings.HasPrefix(path, "/sked/") {
			t.Errorf("the page sent %s, outside /sked/", r)
		}
	}
}

// request is one request the page sent.
type request struct {
	method, path, contentType, body string // path with its query
}

// requestLog keeps the requests a page sends to its own server.
type requestLog struct {
	mu   sync.Mutex
	reqs []request
}

// recordRequests starts keeping the requests the page sends from now on.
func (p *page) recordRequests() *requestLog {
	p.t.Helper()
	l := &requestLog{}
	err := chromedp.Listen(p.ctx, func(ev any) {
		e, ok := ev.(*network.EventRequestWillBeSent)
		if !ok || !strings.HasPrefix(e.Request.URL, "http") {
			return
		}
		r := request{method: e.Request.Method}
		r.path = strings.TrimPrefix(e.Request.URL, "http://")
		r.path = r.path[strings.IndexByte(r.path+"/", '/'):]
		r.contentType, _ = e.Request.Headers["Content-Type"].(string)
		for _, d := range e.Request.PostDataEntries {
			r.body += string(d.Bytes)
		}
		l.mu.Lock()
		l.reqs = append(l.reqs, r)
		l.mu.Unlock()
	})
	if err != nil {
		p.t.Fatalf("listen to the page's requests: %v", err)
	}
	return l
}

// last returns the last request of method.
func (l *requestLog) last(method string) request {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.reqs) - 1; i >= 0; i-- {
		if l.reqs[i].method == method {
			return l.reqs[i]
		}
	}
	return request{}
}

// count counts the requests of method to path.
func (l *requestLog) count(method, path string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.reqs {
		if r.method == method && r.path == path {
			n++
		}
	}
	return n
}

// all lists the requests as "METHOD /path?query".
func (l *requestLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.reqs {
		out = append(out, r.method+" "+r.path)
	}
	return out
}

// until waits for cond (30 s at most), checking every 100 ms.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
	}
}

// click clicks the element sel once it is visible.
func (p *page) click(sel string) {
	p.t.Helper()
	p.do(chromedp.Click(chromedp.CSS(sel)))
}

// setValue sets the value of the input sel, as a person's typing would
// end, and tells the page (input and change events).
func (p *page) setValue(sel, v string) {
	p.t.Helper()
	p.wait(fmt.Sprintf(`document.querySelector(%q) && 'ok'`, sel))
	p.eval(fmt.Sprintf(`(e => { e.value = %q; e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); })(document.querySelector(%q))`, v, sel))
}

// eval runs the JavaScript expression in the page.
func (p *page) eval(expr string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr+"; 0")); err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
}

// call sends a request to the API, like a remote worker, and decodes the
// answer into out (if not nil); it wants a 2xx.
func (a *targets) call(t *testing.T, method, path, body string, out any) {
	t.Helper()
	req, _ := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.NewDecoder(bytes.NewReader(b)).Decode(out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}
