package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"
)

// isTerminal reports whether f is a terminal: a character device other than
// /dev/null (cron, CI and nohup give commands /dev/null).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(fi, null)
}

// terminalSafe is w, or, when w is a terminal, w writing every control
// character but newline and tab as its \u escape (see escapeControls): what
// the CLI prints comes in part from elsewhere (a run's output, an http
// target's answer in a run's error), and must not move the cursor, set the
// window's title or rewrite what was printed before.
func terminalSafe(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		return controlEscaper{w}
	}
	return w
}

// controlEscaper writes to w what it is given with escapeControls.
type controlEscaper struct{ w io.Writer }

func (c controlEscaper) Write(p []byte) (int, error) {
	if _, err := io.WriteString(c.w, escapeControls(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// escapeControls writes each control character of s (C0 but newline, tab
// and the CR of a CRLF line end, DEL, C1) as a \u escape, "\u001b" for
// ESC: readable, and the same character inside a JSON string. A byte that
// is not UTF-8 (such as 0x9b, a terminal's one-byte CSI) becomes U+FFFD.
func escapeControls(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if isControl(r) && !(r == '\r' && strings.HasPrefix(s[i+1:], "\n")) {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isControl reports whether escapeControls escapes r.
func isControl(r rune) bool {
	return r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f || unicode.Is(unicode.Bidi_Control, r)
}
