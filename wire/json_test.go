package wire_test

import (
	"encoding/json"
	"testing"

	"github.com/sked-dev/sked/wire"
)

func TestMarshal(t *testing.T) {
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"string", []string{"sh", "-c", "a && b < c > d"}, `["sh","-c","a && b < c > d"]`},
		{"raw message escaped by json.Marshal", struct {
			P json.RawMessage `json:"p"`
		}{json.RawMessage(`{"cmd": "a \u0026\u0026 b \u003C c \u003e d"}`)}, `{"p":{"cmd":"a && b < c > d"}}`},
		// An escaped backslash followed by u0026 is a backslash and the
		// text u0026, and other escapes stay as they are.
		{"backslash", `\u0026 "q" é` + "\n\u2028", `"\\u0026 \"q\" é\n\u2028"`},
		{"raw backslash", json.RawMessage(`["\\u003c", "\u00e9", "\u0026"]`), `["\\u003c","\u00e9","&"]`},
	} {
		b, err := wire.Marshal(c.v)
		if err != nil || string(b) != c.want {
			t.Errorf("%s: Marshal = %s, %v; want %s", c.name, b, err, c.want)
			continue
		}
		// The same value as json.Marshal writes.
		std, _ := json.Marshal(c.v)
		var got, want any
		if json.Unmarshal(b, &got) != nil || json.Unmarshal(std, &want) != nil || !jsonEqual(got, want) {
			t.Errorf("%s: Marshal = %s, not the value of %s", c.name, b, std)
		}
	}
}

// jsonEqual reports whether two decoded JSON values are equal.
func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
