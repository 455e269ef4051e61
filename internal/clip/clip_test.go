package clip

import "testing"

func TestTail(t *testing.T) {
	for _, c := range []struct {
		s    string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789", 4, "6789"},
		{"aéé", 3, "é"}, // the last 3 bytes begin inside the first é
		{"ééé", 4, "éé"},
	} {
		if got := Tail(c.s, c.max); got != c.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", c.s, c.max, got, c.want)
		}
	}
}

func TestHead(t *testing.T) {
	for _, c := range []struct {
		s    string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789", 4, "0123"},
		{"éé", 3, "é"}, // the second é ends past byte 3
		{"aéé", 3, "aé"},
		{"é", 1, ""},
	} {
		if got := Head(c.s, c.max); got != c.want {
			t.Errorf("Head(%q, %d) = %q, want %q", c.s, c.max, got, c.want)
		}
	}
}

func TestRunes(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 5, "short"},
		{"longer", 5, "long…"},
		{"ééééé", 3, "éé…"},
		{"ab", 1, "…"},
	} {
		if got := Runes(c.s, c.n); got != c.want {
			t.Errorf("Runes(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
