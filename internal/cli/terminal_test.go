package cli

import (
	"bytes"
	"os"
	"testing"
)

// TestEscapeControls: what the CLI prints to a terminal cannot drive it:
// ESC, CR, BEL, DEL and the C1 controls are written as \u escapes, and a
// byte that is not UTF-8 as U+FFFD; newlines, tabs and other text are kept.
func TestEscapeControls(t *testing.T) {
	for in, want := range map[string]string{
		"plain text\n\twith tab, ünïcode ✓": "plain text\n\twith tab, ünïcode ✓",
		"\x1b[31mRED\x1b[0m":                `\u001b[31mRED\u001b[0m`,
		"\x1b]0;title\x07 done\n":           `\u001b]0;title\u0007 done` + "\n",
		"50%\r100%":                         `50%\u000d100%`,
		"HTTP/1.1 500\r\nbody\r\n":          "HTTP/1.1 500\r\nbody\r\n", // CRLF line ends are kept
		"del\x7f c1\u009b2J":                `del\u007f c1\u009b2J`,
		"raw csi \x9b2J":                    "raw csi \uFFFD2J",
		"file\u202Etxt.exe":                 `file\u202etxt.exe`, // a bidi override reorders what follows
	} {
		if got := escapeControls(in); got != want {
			t.Errorf("escapeControls(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTerminalSafe: only a terminal gets the escapes; a pipe, a file or
// /dev/null gets every byte as printed.
func TestTerminalSafe(t *testing.T) {
	var buf bytes.Buffer
	if w := terminalSafe(&buf); w != &buf {
		t.Errorf("terminalSafe(a buffer) = %T, want the buffer itself", w)
	}
	f, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if w := terminalSafe(f); w != f {
		t.Errorf("terminalSafe(a file) = %T, want the file itself", w)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if w := terminalSafe(null); w != null {
		t.Errorf("terminalSafe(/dev/null) = %T, want it itself", w)
	}
	var esc bytes.Buffer
	if n, err := (controlEscaper{&esc}).Write([]byte("a\x1bb")); err != nil || n != 3 || esc.String() != `a\u001bb` {
		t.Errorf("controlEscaper.Write: %d, %v, wrote %q", n, err, esc.String())
	}
}
