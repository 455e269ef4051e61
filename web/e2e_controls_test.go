package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sked-dev/sked/client"
	"github.com/sked-dev/sked/server"
)

// TestDashboard_PauseRunningScheduleRedrawsControls: pausing a schedule
// while its run runs sets pauseRequested, its state stays running; the
// controls must follow it (Resume in, Pause… out) without a reload, and
// back again after Resume.
func TestDashboard_PauseRunningScheduleRedrawsControls(t *testing.T) {
	browser := chromiumOrSkip(t)
	base, api := startServer(t, "")
	id := api.create(t, map[string]any{"type": "http", "name": "slow-sched", "schedule": "* * * * * *",
		"overlap": "skip", "timeout": "60s", "payload": map[string]any{"url": api.slow}})
	select {
	case <-api.slowStarted:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow schedule did not start within 30s")
	}
	b := openBrowser(t, browser, base+"/#/jobs/"+id)
	b.wait(`document.querySelector('#job-head .badge')?.textContent === 'running' && document.querySelector('#pause-form') && 'ok'`)
	b.do(chromedp.Click(chromedp.CSS("#pause-form summary")))
	b.fill("#pause-reason", "maintenance")
	b.do(chromedp.Click(chromedp.CSS(`button[data-action=pause]`)))
	b.wait(`document.querySelector('#action-msg')?.textContent === 'The job pauses when this run ends.' && 'ok'`)
	b.wait(`document.querySelector('#job-paused') && 'ok'`)
	got := b.wait(`(() => { const a = document.querySelector('#job-actions');
		return JSON.stringify({resume: !!a.querySelector('[data-action=resume]'), pause: !!a.querySelector('#pause-form')}); })()`)
	if got != `{"resume":true,"pause":false}` {
		t.Errorf("after pausing the running schedule the controls are %s; want Resume shown and Pause… gone", got)
	}
	b.do(chromedp.Click(chromedp.CSS(`button[data-action=resume]`)))
	b.wait(`document.querySelector('#action-msg')?.textContent === 'Job resumed.' && 'ok'`)
	got = b.wait(`(() => { const a = document.querySelector('#job-actions');
		return JSON.stringify({resume: !!a.querySelector('[data-action=resume]'), pause: !!a.querySelector('#pause-form')}); })()`)
	if got != `{"resume":false,"pause":true}` {
		t.Errorf("after resuming the running schedule the controls are %s; want Resume gone and Pause… back", got)
	}
}

// TestDashboard_TimelineEventsEndClean: a skipped slot's event and a pause
// with an end but no reason read "slot …" and "until …", not with a
// separator left hanging at their end ("slot in 5 min ·").
func TestDashboard_TimelineEventsEndClean(t *testing.T) {
	browser := chromiumOrSkip(t)
	base, api := startServer(t, "")
	id := api.create(t, map[string]any{"type": "http", "schedule": "@every 1h", "payload": map[string]any{"url": api.ok}})
	post := func(path, body string) {
		resp, err := http.Post(base+"/jobs/"+id+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %s", path, resp.Status)
		}
	}
	post("/skip", "")
	post("/pause", `{"until": "2099-01-01T00:00:00Z"}`)
	b := openBrowser(t, browser, base+"/#/jobs/"+id)
	for _, kind := range []string{"skipped", "paused"} {
		got := b.wait(fmt.Sprintf(`document.querySelector('#events li[data-kind=%s]')?.innerText`, kind))
		if strings.HasSuffix(strings.TrimSpace(got), "·") {
			t.Errorf("the %s event reads %q, ending with a separator", kind, got)
		}
	}
}

// TestDashboard_NewOneOffNowIsTheServersNow: a one-off job created in the
// form with no time runs at the server's now (docs/api.md: runAt defaults
// to now, "the client's clock does not count"), not at the browser's
// clock, which a server on --test-clock, or on a database whose clock
// differs, does not go by.
func TestDashboard_NewOneOffNowIsTheServersNow(t *testing.T) {
	browser := chromiumOrSkip(t)
	virtual := time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC)
	base, _ := startServer(t, "", func(c *server.Config) { c.TestClock = virtual })
	b := openBrowser(t, browser, base+"/#/new")
	b.do(chromedp.WaitVisible(chromedp.CSS("#create-form")))
	b.fill("#f-type", "e2e-nobody-serves")
	b.fill("#f-payload", "{}")
	b.do(chromedp.SetValue(chromedp.CSS("#f-kind"), "once"))
	b.do(chromedp.Click(chromedp.CSS("#create-submit")))
	id := b.wait(`(location.hash.match(/^#\/jobs\/([^/?]+)$/) || [])[1]`)
	job, err := (&client.Client{BaseURL: base}).JobGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if job.NextRunAt == nil || !job.NextRunAt.Equal(virtual) {
		t.Errorf("the one-off job made for now runs at %v; want the server's now, %v", job.NextRunAt, virtual)
	}
}

// TestDashboard_CancelledJobOffersNoEdit: a cancelled job cannot be
// edited (PATCH answers 409 "create a new one", and the page's own cancel
// prompt says so), so its page offers no edit form.
func TestDashboard_CancelledJobOffersNoEdit(t *testing.T) {
	browser := chromiumOrSkip(t)
	base, api := startServer(t, "")
	id := api.create(t, map[string]any{"type": "e2e-nobody-serves", "runAt": "2030-01-01T00:00:00Z"})
	b := openBrowser(t, browser, base+"/#/jobs/"+id)
	b.wait(`document.querySelector('#job-head .badge')?.textContent === 'ready' && document.querySelector('#edit-job').offsetParent && 'ok'`)
	b.do(chromedp.Click(chromedp.CSS(`button[data-action=cancel]`)))
	b.do(chromedp.Click(chromedp.CSS(`button[data-action=cancel-confirm]`)))
	b.wait(`document.querySelector('#job-head .badge')?.textContent === 'cancelled' && 'ok'`)
	if got := b.wait(`String(!!document.querySelector('#edit-job').offsetParent)`); got != "false" {
		t.Error("the cancelled job's page still offers Edit definition…, which the API refuses with 409")
	}
}
