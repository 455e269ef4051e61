package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/db/postgres"
	"github.com/sked-dev/sked/db/postgres/postgrestest"
	"github.com/sked-dev/sked/db/sqlite/sqlitetest"
	"github.com/sked-dev/sked/wire"
)

// sleepers adds a waiter of max for types per entry and puts each to sleep,
// in order: the first is first in line.
func sleepers(t *testing.T, cw *claimWaiters, max int, types ...[]string) []*claimWaiter {
	t.Helper()
	var ws []*claimWaiter
	for _, ts := range types {
		w := newClaimWaiter(ts, max)
		if !cw.add(w) {
			t.Fatalf("add %v: refused", ts)
		}
		if !cw.sleep(w) {
			t.Fatalf("sleep %v: a wake-up was owed", ts)
		}
		ws = append(ws, w)
	}
	return ws
}

// testWaiters is a claimWaiters for limit claims whose recheck does not come
// during a test.
func testWaiters(limit int) *claimWaiters {
	cw := newClaimWaiters(limit)
	cw.recheck = time.Hour
	return cw
}

// woken reports which of ws were signalled, taking the signals.
func woken(ws []*claimWaiter) []bool {
	out := make([]bool, len(ws))
	for i, w := range ws {
		select {
		case <-w.c:
			out[i] = true
		default:
		}
	}
	return out
}

func wantWoken(t *testing.T, what string, ws []*claimWaiter, want ...bool) {
	t.Helper()
	got := woken(ws)
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s: woken got %v, want %v", what, got, want)
			return
		}
	}
}

func TestClaimWaiters_Wake(t *testing.T) {
	t.Parallel()
	cw := testWaiters(10)
	ws := sleepers(t, cw, 2, []string{"a"}, []string{"a", "b"}, []string{"a"}, []string{"c"})
	cw.wake("a", 1)
	wantWoken(t, "one job of a", ws, true, false, false, false)
	cw.wake("a", 3) // two waiters of max 2 take 3 jobs
	wantWoken(t, "three jobs of a", ws, false, true, true, false)
	cw.wake("b", 1) // the waiter of b is woken, none of b is asleep: owed
	wantWoken(t, "one job of b, none asleep", ws, false, false, false, false)
	cw.begin(ws[1])
	if cw.sleep(ws[1]) {
		t.Error("a waiter of b went to sleep though a wake-up of b was owed")
	}
	if !cw.sleep(ws[1]) {
		t.Error("the owed wake-up was taken twice")
	}
}

func TestClaimWaiters_Doubt(t *testing.T) {
	t.Parallel()
	cw := testWaiters(10)
	ws := sleepers(t, cw, 1, []string{"a", "b"}, []string{"a"}, []string{"b"}, []string{"c"}, []string{"c"})
	cw.wakeAll()
	// One per type; the first waiter counts for both of its types.
	got := woken(ws)
	if !got[0] || got[1] || got[2] || !got[3] || got[4] {
		t.Fatalf("wakeAll: woken %v, want the first (a and b) and the first of c", got)
	}
	cw.begin(ws[0])
	cw.claimed(ws[0], []string{"b"}) // full, in doubt: the next in line of a and b
	wantWoken(t, "full claim in doubt", ws, false, true, true, false, false)
	cw.begin(ws[1])
	cw.claimed(ws[1], nil)
	wantWoken(t, "empty claim", ws, false, false, false, false, false)

	// A waiter woken for a counted job that leaves before it claims passes
	// its wake-up on; its full claim would not have.
	cw2 := testWaiters(10)
	ws2 := sleepers(t, cw2, 1, []string{"x"}, []string{"x"}, []string{"x"})
	cw2.wake("x", 1)
	wantWoken(t, "one job of x", ws2, true, false, false)
	cw2.remove(ws2[0])
	wantWoken(t, "the woken left", ws2, false, true, false)
	cw2.begin(ws2[1])
	cw2.claimed(ws2[1], []string{"x"})
	wantWoken(t, "a passed-on wake-up claimed full", ws2, false, false, true)
}

// TestClaimWaiters_SeveralTypes: a waiter of several types woken for a
// counted job of one, whose full claim took a job of that type, wakes no
// one; one whose claim took a job of another type wakes the next in line
// of its types, for the job it was woken for may wait still.
func TestClaimWaiters_SeveralTypes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		what    string
		claimed string
		want    []bool
	}{
		{"the job of a claimed", "a", []bool{false, false, false}},
		{"a job of b claimed instead", "b", []bool{false, true, true}},
	} {
		cw := testWaiters(10)
		ws := sleepers(t, cw, 1, []string{"a", "b"}, []string{"a"}, []string{"b"})
		cw.wake("a", 1)
		wantWoken(t, "one job of a", ws, true, false, false)
		cw.begin(ws[0])
		cw.claimed(ws[0], []string{c.claimed})
		wantWoken(t, c.what, ws, c.want...)
	}
}

func TestClaimWaiters_Limit(t *testing.T) {
	t.Parallel()
	cw := testWaiters(2)
	a, b, c := newClaimWaiter([]string{"a"}, 1), newClaimWaiter([]string{"a"}, 1), newClaimWaiter([]string{"a"}, 1)
	if !cw.add(a) || !cw.add(b) {
		t.Fatal("the first two waiters were refused")
	}
	if cw.add(c) {
		t.Fatal("a third waiter was added past the limit of 2")
	}
	cw.remove(a)
	if !cw.add(c) {
		t.Fatal("a waiter was refused after one left")
	}
	cw.remove(b)
	cw.remove(c)
	if len(cw.byType) != 0 || cw.waiting != 0 {
		t.Fatalf("waiters left after removing all: %d, %v", cw.waiting, cw.byType)
	}
}

// TestClaimWaiters_Refuse: refused claims are logged at most once every
// refusedLogEvery, each line with the number refused since the last.
func TestClaimWaiters_Refuse(t *testing.T) {
	t.Parallel()
	cw := testWaiters(1)
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	for i, tc := range []struct {
		at   time.Duration
		n    int
		logs bool
	}{{0, 1, true}, {time.Second, 0, false}, {9 * time.Second, 0, false}, {10 * time.Second, 3, true}, {11 * time.Second, 0, false}} {
		if n, logs := cw.refuse(t0.Add(tc.at)); n != tc.n || logs != tc.logs {
			t.Errorf("refusal %d at +%s: got %d, %v; want %d, %v", i, tc.at, n, logs, tc.n, tc.logs)
		}
	}
}

// countingStore is a real store that counts the claims made through it:
// each is a write transaction.
type countingStore struct {
	db.Store
	claims atomic.Int64
}

func (s *countingStore) RunClaim(ctx context.Context, p db.RunClaimParams) ([]db.Claim, error) {
	s.claims.Add(1)
	return s.Store.RunClaim(ctx, p)
}

// herd is an API whose claims are counted, served over HTTP, with long
// polls waiting on it. Its recheck does not come during a test: only
// wake-ups make claims.
type herd struct {
	t        *testing.T
	api      *API
	store    *countingStore
	srv      *httptest.Server
	shutdown chan struct{}
	answers  chan polled
	polls    int
}

// polled is a long poll's answer.
type polled struct {
	worker string
	status int
	resp   wire.ClaimResponse
}

func newHerd(t *testing.T, store db.Store, maxWaits int) *herd {
	t.Helper()
	return newHerdWith(t, store, Config{MaxClaimWaits: maxWaits})
}

// newHerdWith is newHerd with the API configured as cfg (its Store and
// Shutdown set by the herd).
func newHerdWith(t *testing.T, store db.Store, cfg Config) *herd {
	t.Helper()
	h := &herd{t: t, store: &countingStore{Store: store}, shutdown: make(chan struct{}), answers: make(chan polled, 1000)}
	cfg.Store, cfg.Shutdown = h.store, h.shutdown
	h.api = New(cfg)
	h.api.h.claimers.recheck = time.Hour
	h.srv = httptest.NewServer(h.api)
	t.Cleanup(h.srv.Close)
	return h
}

// post sends body to path and returns the answer's status and body.
func (h *herd) post(path, body string) (int, http.Header, []byte) {
	res, err := h.srv.Client().Post(h.srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		h.t.Error(err)
		return 0, nil, nil
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Error(err)
	}
	return res.StatusCode, res.Header, b
}

// poll starts n long polls for typ taking up to max jobs each, and returns
// once all of them sleep.
func (h *herd) poll(n int, typ string, max int) {
	h.t.Helper()
	h.pollTypes(n, []string{typ}, max)
}

// pollTypes starts n long polls for types taking up to max jobs each, and
// returns once all of them sleep.
func (h *herd) pollTypes(n int, types []string, max int) {
	h.t.Helper()
	typ := types[0]
	want := h.asleep(typ) + n
	quoted, _ := json.Marshal(types)
	for range n {
		worker := fmt.Sprintf("w%d", h.polls)
		h.polls++
		go func() {
			status, _, b := h.post("/claims", fmt.Sprintf(`{"workerId": %q, "types": %s, "max": %d, "wait": "50s"}`, worker, quoted, max))
			p := polled{worker: worker, status: status}
			if status == http.StatusOK {
				if err := json.Unmarshal(b, &p.resp); err != nil {
					h.t.Errorf("claim answer %s: %v", b, err)
				}
			}
			h.answers <- p
		}()
	}
	h.waitFor(fmt.Sprintf("%d polls of %s asleep", want, typ), func(tw *typeWaiters) bool { return tw.sleeping.Len() == want }, typ)
}

// asleep is how many claims of typ sleep.
func (h *herd) asleep(typ string) int {
	cw := h.api.h.claimers
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if tw := cw.byType[typ]; tw != nil {
		return tw.sleeping.Len()
	}
	return 0
}

// waitFor waits until cond holds of typ's waiters (what it describes).
func (h *herd) waitFor(what string, cond func(*typeWaiters) bool, typ string) {
	h.t.Helper()
	cw := h.api.h.claimers
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		cw.mu.Lock()
		tw := cw.byType[typ]
		ok := tw != nil && cond(tw)
		cw.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("waited 30s for %s", what)
		}
	}
}

// answered returns the next n answers.
func (h *herd) answered(n int) []polled {
	h.t.Helper()
	var out []polled
	for range n {
		select {
		case p := <-h.answers:
			if p.status != http.StatusOK {
				h.t.Fatalf("%s: status %d", p.worker, p.status)
			}
			out = append(out, p)
		case <-time.After(30 * time.Second):
			h.t.Fatalf("waited 30s for %d answers, got %d", n, len(out))
		}
	}
	return out
}

// finish shuts the API down and returns the answers of the polls still
// waiting, which it wants empty.
func (h *herd) finish(waiting int) {
	h.t.Helper()
	close(h.shutdown)
	for _, p := range h.answered(waiting) {
		if len(p.resp.Claims) != 0 {
			h.t.Errorf("%s claimed %d jobs after all were claimed", p.worker, len(p.resp.Claims))
		}
	}
}

// claimedOnce checks that answers claimed each of jobs once, each answer at
// most max of them.
func claimedOnce(t *testing.T, answers []polled, max int, jobs ...string) {
	t.Helper()
	got := map[string]string{}
	for _, p := range answers {
		if len(p.resp.Claims) == 0 || len(p.resp.Claims) > max {
			t.Errorf("%s claimed %d jobs, want 1 to %d", p.worker, len(p.resp.Claims), max)
		}
		for _, c := range p.resp.Claims {
			if w, ok := got[c.ID]; ok {
				t.Errorf("job %s claimed by %s and %s", c.ID, w, p.worker)
			}
			got[c.ID] = p.worker
		}
	}
	for _, id := range jobs {
		if _, ok := got[id]; !ok {
			t.Errorf("job %s was not claimed", id)
		}
	}
	if len(got) != len(jobs) {
		t.Errorf("claimed %d jobs, want %d", len(got), len(jobs))
	}
}

// createDue creates jobs of ps in store, unannounced, and returns their ids.
func createDue(t *testing.T, store db.Store, ps ...db.JobCreateParams) []string {
	t.Helper()
	var ids []string
	for _, p := range ps {
		j, _, err := store.JobCreate(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	return ids
}

// ofType is n creations of a job of typ due now.
func ofType(typ string, n int) []db.JobCreateParams {
	ps := make([]db.JobCreateParams, n)
	for i := range ps {
		ps[i] = db.JobCreateParams{Type: typ}
	}
	return ps
}

// postBatch creates n jobs of typ through POST /jobs/batch and returns
// their ids.
func (h *herd) postBatch(typ string, n int) []string {
	h.t.Helper()
	jobs := make([]map[string]string, n)
	for i := range jobs {
		jobs[i] = map[string]string{"type": typ}
	}
	body, _ := json.Marshal(map[string]any{"jobs": jobs})
	status, _, b := h.post("/jobs/batch", string(body))
	var batch jobBatchResponse
	if err := json.Unmarshal(b, &batch); status != http.StatusCreated || err != nil {
		h.t.Fatalf("POST /jobs/batch: %d %s", status, b)
	}
	ids := make([]string, len(batch.Jobs))
	for i, j := range batch.Jobs {
		ids[i] = j.ID
	}
	return ids
}

// settled waits until asleep claims of typ sleep again, then checks that
// the claims made since the count before number want (what they were for).
func (h *herd) settled(typ string, asleep int, before, want int64, what string) {
	h.t.Helper()
	h.waitFor("the others asleep", func(tw *typeWaiters) bool { return tw.sleeping.Len() == asleep }, typ)
	if got := h.store.claims.Load() - before; got != want {
		h.t.Errorf("claims for %s: got %d, want %d", what, got, want)
	}
}

// TestHandler_ClaimHerd: a job created while 50 claims of its type wait
// costs one claim (one write transaction), not 50, and is claimed once; a
// batch of three costs three.
func TestHandler_ClaimHerd(t *testing.T) {
	t.Parallel()
	const n = 50
	h := newHerd(t, sqlitetest.Open(t), 0)
	h.poll(n, "thumb", 1)
	before := h.store.claims.Load()
	if before != n {
		t.Fatalf("claims on arrival: got %d, want %d", before, n)
	}

	status, _, b := h.post("/jobs", `{"type": "thumb"}`)
	var j db.Job
	if err := json.Unmarshal(b, &j); status != http.StatusCreated || err != nil {
		t.Fatalf("create: %d %s", status, b)
	}
	claimedOnce(t, h.answered(1), 1, j.ID)
	h.settled("thumb", n-1, before, 1, "one job")

	batch := h.postBatch("thumb", 3)
	claimedOnce(t, h.answered(3), 1, batch...)
	h.settled("thumb", n-4, before, 4, "one job and a batch of three")
	h.finish(n - 4)
	if got := h.store.claims.Load() - before; got != 4 {
		t.Errorf("claims after shutdown: got %d, want 4", got)
	}
}

// TestHandler_ClaimHerdDoubt: jobs that became due unannounced (another
// node's write, told by WakeClaims) are all claimed at once, though the
// wake-up woke one waiter: each full claim wakes the next, and the one that
// comes back short wakes no more. Seven jobs, waiters taking two: four
// claims.
func TestHandler_ClaimHerdDoubt(t *testing.T) {
	t.Parallel()
	const n = 10
	store := sqlitetest.Open(t)
	h := newHerd(t, store, 0)
	h.poll(n, "render", 2)
	before := h.store.claims.Load()
	ids := createDue(t, store, ofType("render", 7)...)
	h.api.WakeClaims(nil)
	claimedOnce(t, h.answered(4), 2, ids...)
	h.settled("render", n-4, before, 4, "7 jobs, 2 a claim")
	h.finish(n - 4)
}

// TestHandler_ClaimHerdCounted: jobs another node announces by type and
// count wake the waiters of that type, as many as the count needs, and no
// waiter of another type; a wake-up that says nothing new wakes none.
func TestHandler_ClaimHerdCounted(t *testing.T) {
	t.Parallel()
	store := sqlitetest.Open(t)
	h := newHerd(t, store, 0)
	h.poll(10, "thumb", 2)
	h.poll(5, "mail", 1)
	before := h.store.claims.Load()
	ids := createDue(t, store, ofType("thumb", 3)...)
	h.api.WakeClaims(map[string]int{})
	h.api.WakeClaims(map[string]int{"thumb": 3})
	claimedOnce(t, h.answered(2), 2, ids...)
	h.settled("thumb", 8, before, 2, "3 jobs announced, 2 a claim")
	h.finish(13)
}

// TestHandler_ClaimHerdSeveralTypes: a claim of several types, woken for a
// job of one, may take an earlier job of another type; coming back full,
// it wakes the next in line, which takes the job it was woken for, at once
// rather than at its type's next recheck.
func TestHandler_ClaimHerdSeveralTypes(t *testing.T) {
	t.Parallel()
	store := sqlitetest.Open(t)
	h := newHerd(t, store, 0)
	h.pollTypes(1, []string{"mail", "thumb"}, 1)
	h.poll(1, "thumb", 1)
	before := h.store.claims.Load()
	ids := createDue(t, store,
		db.JobCreateParams{Type: "mail", RunAt: store.Now().Add(-time.Minute)}, // the earlier, unannounced
		db.JobCreateParams{Type: "thumb"})
	h.api.WakeClaims(map[string]int{"thumb": 1})
	answers := h.answered(2)
	claimedOnce(t, answers, 1, ids...)
	if got := h.store.claims.Load() - before; got != 2 {
		t.Errorf("claims for the two jobs: got %d, want 2", got)
	}
	h.finish(0)
}

// newPostgresHerd is a herd, its API configured as cfg, on a PostgreSQL
// store whose wake-ups it forwards to WakeClaims, as sked serve does, and
// counts; other is a second node on the same database.
func newPostgresHerd(t *testing.T, cfg Config) (h *herd, other *postgres.Store, forwarded *atomic.Int64) {
	t.Helper()
	url := postgrestest.URL(t)
	other, here := postgrestest.OpenURL(t, url), postgrestest.OpenURL(t, url)
	ctx, stop := context.WithCancel(context.Background())
	wakes := here.Wakeups(ctx)
	postgrestest.AwaitListening(t, other, wakes, "warm-up")
	h = newHerdWith(t, here, cfg)
	forwarded = &atomic.Int64{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range wakes {
			forwarded.Add(1)
			h.api.WakeClaims(here.TakeWakeups())
		}
	}()
	t.Cleanup(func() { stop(); <-done })
	return h, other, forwarded
}

// TestHandler_ClaimHerdPostgres: on PostgreSQL a job created on another
// node reaches the waiting claims of this one as a NOTIFY that says its
// type and count: it costs one claim per wake-up, by a waiter of its
// type, however many claims of other types wait, and the job is claimed
// once.
func TestHandler_ClaimHerdPostgres(t *testing.T) {
	t.Parallel()
	const n = 30
	h, other, forwarded := newPostgresHerd(t, Config{})
	h.poll(n, "thumb", 1)
	for _, typ := range []string{"mail", "render", "sync"} {
		h.poll(10, typ, 1)
	}
	before := h.store.claims.Load()

	j, _, err := other.JobCreate(t.Context(), db.JobCreateParams{Type: "thumb"})
	if err != nil {
		t.Fatal(err)
	}
	claimedOnce(t, h.answered(1), 1, j.ID)
	h.finish(n + 30 - 1)
	claims, wakeUps := h.store.claims.Load()-before, forwarded.Load()
	if claims < 1 || claims > wakeUps {
		t.Errorf("claims for one job: got %d for %d wake-ups, want 1 to %d", claims, wakeUps, wakeUps)
	}
	t.Logf("%d claims for %d wake-ups with %d claims waiting", claims, wakeUps, n+30)
}

// TestHandler_ClaimHerdPostgresOwnWrites: on PostgreSQL a batch created
// through this node's API reaches its waiting claims once, by the NOTIFY
// that comes back to the node, not also by the handler: five jobs, five
// claims by waiters taking one each, where the handler's own wake-up on top
// made ten.
func TestHandler_ClaimHerdPostgresOwnWrites(t *testing.T) {
	t.Parallel()
	const n = 20
	h, _, _ := newPostgresHerd(t, Config{StoreAnnounces: true})
	h.poll(n, "thumb", 1)
	before := h.store.claims.Load()

	batch := h.postBatch("thumb", 5)
	claimedOnce(t, h.answered(5), 1, batch...)
	h.settled("thumb", n-5, before, 5, "5 jobs created through this node")
	h.finish(n - 5)
}

// TestHandler_ClaimLimit: with as many claims waiting as allowed, a claim
// that finds no job answers 503 at once with Retry-After, having claimed
// once; one that finds a job gets it; one that does not wait is answered
// as ever; and once a waiting claim ends, a new one waits again.
func TestHandler_ClaimLimit(t *testing.T) {
	t.Parallel()
	store := sqlitetest.Open(t)
	h := newHerd(t, store, 2)
	h.poll(2, "a", 1)
	before := h.store.claims.Load()

	status, header, b := h.post("/claims", `{"workerId": "late", "types": ["a"], "wait": "50s"}`)
	if status != http.StatusServiceUnavailable || header.Get("Content-Type") != "application/problem+json" || header.Get("Retry-After") != "5" {
		t.Fatalf("claim past the limit: got %d %q Retry-After %q: %s", status, header.Get("Content-Type"), header.Get("Retry-After"), b)
	}
	var p problem
	if err := json.Unmarshal(b, &p); err != nil || p.Status != status || !strings.Contains(p.Detail, "--max-claim-waits") || !strings.Contains(p.Detail, "(2;") {
		t.Errorf("problem: got %s (%v)", b, err)
	}
	if got := h.store.claims.Load() - before; got != 1 {
		t.Errorf("claims made by the refused claim: got %d, want 1", got)
	}
	if status, _, b := h.post("/claims", `{"workerId": "quick", "types": ["a"], "wait": "0s"}`); status != http.StatusOK || string(b) != "{\"claims\":[],\"waited\":\"0s\"}\n" {
		t.Errorf("claim without a wait past the limit: got %d %s", status, b)
	}

	// Created in the store, the job wakes no one; the claim past the limit
	// takes it at once.
	j, _, err := store.JobCreate(t.Context(), db.JobCreateParams{Type: "a"})
	if err != nil {
		t.Fatal(err)
	}
	status, _, b = h.post("/claims", `{"workerId": "late", "types": ["a"], "wait": "50s"}`)
	var cr wire.ClaimResponse
	if err := json.Unmarshal(b, &cr); status != http.StatusOK || err != nil || len(cr.Claims) != 1 || cr.Claims[0].ID != j.ID {
		t.Errorf("claim past the limit with a job due: got %d %s", status, b)
	}

	// A waiting claim that gets a job makes room for one more.
	status, _, b = h.post("/jobs", `{"type": "a"}`)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, b)
	}
	h.answered(1)
	h.poll(1, "a", 1)
	h.finish(2)
}
