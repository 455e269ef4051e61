package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/wire"
)

// TestHandler_WorkerStopping: a stop naming a claim ends that claim's wait
// alone, and one that reaches the server before its claim makes the claim
// answer at once having claimed nothing; a stop naming no claim ends all
// the worker's waits.
func TestHandler_WorkerStopping(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, nil)
	claim := func(claimID string) chan []wire.Claimed {
		out := make(chan []wire.Claimed, 1)
		go func() {
			res := e.do(http.MethodPost, "/claims", `{"workerId": "box/1", "types": ["t"], "wait": "20s"}`, wire.ClaimIDHeader, claimID)
			var resp wire.ClaimResponse
			if res.status != http.StatusOK || json.Unmarshal(res.body, &resp) != nil {
				t.Errorf("claim %s: %d %s", claimID, res.status, res.body)
			}
			out <- resp.Claims
		}()
		return out
	}
	waiting := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if w, _ := e.api.ClaimWaits(); w == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("never %d claims waiting", n)
			}
		}
	}

	// A stop that overtakes its claim: the claim claims nothing, though a
	// job is due.
	e.do(http.MethodPost, "/workers/stopping", `{"workerId": "box/1", "claimId": "early"}`).wantStatus(t, http.StatusNoContent)
	j, _, err := e.store.JobCreate(context.Background(), db.JobCreateParams{Type: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if claims := <-claim("early"); len(claims) != 0 {
		t.Fatalf("a claim stopped before it arrived took %+v; want nothing", claims)
	}
	if got, _ := e.store.JobGet(context.Background(), j.ID); got.State != db.StateReady {
		t.Fatalf("the job is %s; want it ready still", got.State)
	}
	if claims := <-claim("later"); len(claims) != 1 {
		t.Fatalf("another claim of the worker took %+v; want the job", claims)
	}

	// A stop naming one of two waiting claims ends that one alone; one
	// naming none ends the other.
	one, two := claim("one"), claim("two")
	waiting(2)
	e.do(http.MethodPost, "/workers/stopping", `{"workerId": "box/1", "claimId": "one"}`).wantStatus(t, http.StatusNoContent)
	if claims := <-one; len(claims) != 0 {
		t.Fatalf("stopped claim: %+v", claims)
	}
	waiting(1)
	e.do(http.MethodPost, "/workers/stopping", `{"workerId": "box/1"}`).wantStatus(t, http.StatusNoContent)
	if claims := <-two; len(claims) != 0 {
		t.Fatalf("claim stopped with the worker: %+v", claims)
	}

	long := strings.Repeat("x", maxClaimIDLen+1)
	e.do(http.MethodPost, "/workers/stopping", `{"workerId": "box/1", "claimId": "`+long+`"}`).wantStatus(t, http.StatusUnprocessableEntity)
	e.do(http.MethodPost, "/claims", `{"workerId": "box/1", "types": ["t"]}`, wire.ClaimIDHeader, long).wantStatus(t, http.StatusUnprocessableEntity)
}

// TestStoppingWorkers_EndedKept: a stop that overtook its claim refuses
// that claim once, and is forgotten after two endedFor at the most (a
// claim id used again then waits); a flood of stops keeps at most maxEnded.
func TestStoppingWorkers_EndedKept(t *testing.T) {
	t.Parallel()
	var s stoppingWorkers
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s.stop("w", "a", t0)
	if _, ok := s.add("w", "a", t0.Add(time.Second)); ok {
		t.Fatal("a claim whose stop came first was taken")
	}
	if c, ok := s.add("w", "a", t0.Add(2*time.Second)); !ok {
		t.Fatal("the claim id used again was refused: the stop ended one claim")
	} else {
		s.remove("w", c)
	}
	s.stop("w", "b", t0)
	if c, ok := s.add("w", "b", t0.Add(2*endedFor)); !ok {
		t.Fatal("a stop was still kept two endedFor later")
	} else {
		s.remove("w", c)
	}
	for i := range maxEnded + 10 {
		s.stop("w", fmt.Sprint("flood", i), t0.Add(3*endedFor))
	}
	if n := len(s.ended) + len(s.older); n > maxEnded {
		t.Fatalf("%d stops kept; want at most %d", n, maxEnded)
	}
}
