package cli

import (
	"strings"
	"testing"
	"time"
)

// TestParseJobs: YAML and JSON read alike, payload keys keep their order
// and numbers their text, so that a payload applied as exported is the
// same JSON.
func TestParseJobs(t *testing.T) {
	for _, src := range []string{
		"- name: a\n  type: http\n  payload: {url: 'https://x.example', body: {z: 1, a: 2.50, n: null, t: true}}\n  timeout: 90s\n",
		`[{"name": "a", "type": "http", "payload": {"url": "https://x.example", "body": {"z": 1, "a": 2.50, "n": null, "t": true}}, "timeout": "90s"}]`,
	} {
		jobs, err := parseJobs([]byte(src))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if len(jobs) != 1 || string(jobs[0].Payload) != `{"url":"https://x.example","body":{"z":1,"a":2.50,"n":null,"t":true}}` ||
			time.Duration(jobs[0].Timeout) != 90*time.Second {
			t.Errorf("%s: read %+v (payload %s)", src, jobs, jobs[0].Payload)
		}
	}
	if _, err := parseJobs([]byte("- name: a\n  type: noop\n  timeout: soon\n")); err == nil || !strings.Contains(err.Error(), "not a duration") {
		t.Errorf("a bad duration: %v", err)
	}
}
