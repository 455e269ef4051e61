package db_test

import (
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
)

func TestSameJSON(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{`{"cmd": "a && b"}`, `{"cmd":"a && b"}`, true},
		{`{"cmd":"a \u0026\u0026 b < c > d"}`, `{"cmd":"a && b < c > d"}`, true}, // stored by an older client
		{`{"cmd":"a && b"}`, `{"cmd":"a & b"}`, false},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, false},                      // key order is kept, and so it counts
		{`{"cmd":"\\u0026"}`, `{"cmd":"&"}`, false},                    // a backslash, then u0026
		{`{"cmd":"a \u003C b \u003E c"}`, `{"cmd":"a < b > c"}`, true}, // upper-case hex
		{`{"name":"caf\u00e9"}`, `{"name":"café"}`, true},
		{`{"a":1}`, `{"a":1.0}`, false}, // numbers as written
		{`{"a":1}`, `{"a":1} {"b":2}`, false},
		{`not json`, `not json`, true},
		{`not json`, `not  json`, false},
	} {
		if got := db.SameJSON([]byte(tc.a), []byte(tc.b)); got != tc.same {
			t.Errorf("SameJSON(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}

// TestIDCeiling: the ceiling of t is above the ids of jobs created up to t
// and below those of jobs created later.
func TestIDCeiling(t *testing.T) {
	at := time.Date(2026, 12, 1, 8, 0, 0, 500_000, time.UTC) // half a millisecond in
	ceiling := db.IDCeiling(at)
	for _, c := range []struct {
		created time.Time
		below   bool
	}{
		{at.Add(-time.Hour), true}, {at.Add(-time.Millisecond), true}, {at.Truncate(time.Millisecond), true}, {at, true},
		{at.Add(time.Millisecond), false}, {at.Add(time.Hour), false},
	} {
		for range 100 { // the ids' random part varies
			if id := db.NewID(c.created); (id < ceiling) != c.below {
				t.Fatalf("id %s of a job created at %v: below the ceiling %s of %v is %v, want %v", id, c.created, ceiling, at, !c.below, c.below)
			}
		}
	}
	if got := db.IDCeiling(time.Date(10900, 1, 1, 0, 0, 0, 0, time.UTC)); got <= db.NewID(at) {
		t.Fatalf("the ceiling past the last time a ULID holds is %s, not above every id", got)
	}
}

func TestTextFault(t *testing.T) {
	for _, tc := range []struct {
		s      string
		offset int
		nul    bool
		msg    string // CheckText's, of field f
	}{
		{"", -1, false, ""},
		{"plain é \uFFFD", -1, false, ""}, // U+FFFD itself is text
		{"a\x00b", 1, true, "f holds a NUL character (U+0000) at byte 1, which sked cannot store; remove it"},
		{"é\xff\x00", 2, false, "f is not UTF-8 text (byte 2 is 0xff), which sked cannot store; send UTF-8"},
		{"\xe2\x82", 0, false, "f is not UTF-8 text (byte 0 is 0xe2), which sked cannot store; send UTF-8"}, // a rune cut short
	} {
		offset, nul := db.TextFault(tc.s)
		err := db.CheckText("f", tc.s)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if offset != tc.offset || nul != tc.nul || msg != tc.msg {
			t.Errorf("%q: TextFault %d, %v, CheckText %q; want %d, %v, %q", tc.s, offset, nul, msg, tc.offset, tc.nul, tc.msg)
		}
	}
}
