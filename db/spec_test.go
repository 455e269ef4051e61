package db_test

import (
	"testing"

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
