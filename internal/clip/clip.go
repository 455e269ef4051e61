// Package clip shortens text to a bound without cutting a character in
// two: a run's output to what is kept of it, a message to what a chat
// allows, a column to its width.
package clip

import "unicode/utf8"

// Tail returns the last max bytes of s, from the first character that
// begins in them; s itself when it is no longer.
func Tail(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[len(s)-max:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

// Head returns the first max bytes of s, up to the last character that
// ends in them; s itself when it is no longer.
func Head(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max // the first byte left out
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// Runes returns s shortened to at most n characters, the last of them an
// ellipsis (…) when it was cut; s itself when it is no longer.
func Runes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-1, 0)]) + "…"
}
