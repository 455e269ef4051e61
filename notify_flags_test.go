package main

import (
	"io"
	"strings"
	"testing"
)

func TestParseServeConfig_NotifyAndPublicURL(t *testing.T) {
	getenv := func(k string) string {
		return map[string]string{
			"SKED_NOTIFY":     "slack:https://hooks.slack.com/services/T/B/x smtp://a:pw@mail.example.com?to=ops@example.com&from=sked@example.com",
			"SKED_PUBLIC_URL": "https://sked.example.com/ops/",
		}[k]
	}
	cfg, err := parseServeConfig(nil, getenv, io.Discard)
	if err != nil || len(cfg.NotifySinks) != 2 || cfg.NotifySinks[1].SMTP == nil || cfg.PublicURL != "https://sked.example.com/ops/" {
		t.Fatalf("config from env = %+v, %v", cfg, err)
	}
	for _, bad := range []string{"sked.example.com", "ftp://sked.example.com", "https://sked.example.com/?x=1", "https://sked.example.com/#/jobs"} {
		_, err := parseServeConfig([]string{"--public-url", bad}, func(string) string { return "" }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--public-url") || !strings.Contains(err.Error(), "e.g. https://sked.example.com") {
			t.Errorf("--public-url %s: %v, want a refusal that says what to give", bad, err)
		}
	}
	_, err = parseServeConfig([]string{"--notify", "smtp://a:pw@mail.example.com"}, func(string) string { return "" }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--notify") || !strings.Contains(err.Error(), "recipient") || strings.Contains(err.Error(), "pw") {
		t.Errorf("--notify smtp without recipients: %v", err)
	}
}
