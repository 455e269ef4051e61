package clip

import "testing"

// TestClip: each function shortens to its bound without cutting a
// character, and leaves text within it as it is.
func TestClip(t *testing.T) {
	for _, c := range []struct {
		name  string
		clip  func(string, int) string
		s     string
		bound int
		want  string
	}{
		{"Tail", Tail, "short", 10, "short"},
		{"Tail", Tail, "0123456789", 4, "6789"},
		{"Tail", Tail, "aéé", 3, "é"}, // the last 3 bytes begin inside the first é
		{"Tail", Tail, "ééé", 4, "éé"},
		{"Head", Head, "short", 10, "short"},
		{"Head", Head, "0123456789", 4, "0123"},
		{"Head", Head, "éé", 3, "é"}, // the second é ends past byte 3
		{"Head", Head, "aéé", 3, "aé"},
		{"Head", Head, "é", 1, ""},
		{"Runes", Runes, "short", 5, "short"},
		{"Runes", Runes, "longer", 5, "long…"},
		{"Runes", Runes, "ééééé", 3, "éé…"},
		{"Runes", Runes, "ab", 1, "…"},
	} {
		if got := c.clip(c.s, c.bound); got != c.want {
			t.Errorf("%s(%q, %d) = %q, want %q", c.name, c.s, c.bound, got, c.want)
		}
	}
}
