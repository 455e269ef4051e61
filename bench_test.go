package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// TestRun_Bench runs `sked bench` at a small size and checks that it prints
// the table and the command that reproduces it.
func TestRun_Bench(t *testing.T) {
	var out strings.Builder
	args := []string{"bench", "--jobs", "200", "--spike", "20", "--backlog", "500", "--workers", "8", "--db-dir", t.TempDir()}
	if err := run(context.Background(), args, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"command: sked bench --jobs 200 --backlog 500 --workers 8 --sync full --spike 20", "end to end", "start lateness", "peak RSS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if err := run(context.Background(), []string{"bench", "--sync", "off"}, func(string) string { return "" }, io.Discard, io.Discard); err == nil {
		t.Error("--sync off: no error")
	}
}
