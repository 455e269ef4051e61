package main

import (
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/sked-dev/sked/server"
	"github.com/sked-dev/sked/worker"
)

// opsFlags are the flags of `sked serve` for operators: who may call it and
// how long history is kept.
type opsFlags struct {
	token, insecure, allowedHosts, retention     string
	jobDefaults, defaultAttempts, defaultBackoff string
}

// register adds the flags to fs; env gives each its SKED_… fallback.
func (o *opsFlags) register(fs *flag.FlagSet, env func(name, def string) string) {
	fs.StringVar(&o.token, "token", env("token", ""),
		"require this bearer token on every API request; several, comma-separated, are all accepted (SKED_TOKEN)")
	fs.StringVar(&o.insecure, "insecure", env("insecure", "false"),
		"allow listening beyond loopback without a token (SKED_INSECURE)")
	fs.StringVar(&o.allowedHosts, "allowed-hosts", env("allowed-hosts", ""),
		"without a token the API answers only the Host names localhost, 127.0.0.1 and [::1]; "+
			"also answer these, comma-separated, e.g. the name a reverse proxy forwards (SKED_ALLOWED_HOSTS)")
	fs.StringVar(&o.retention, "retention", env("retention", worker.DefaultRetention.String()),
		"prune finished one-off jobs and runs of recurring jobs older than this; 0 keeps everything (SKED_RETENTION)")
	fs.StringVar(&o.jobDefaults, "job-defaults", env("job-defaults", ""),
		"attempts and backoff of jobs that do not set them, by type: TYPE=ATTEMPTS/BACKOFF, comma-separated, * for every other type "+
			"(sked's own: http=25/1m, the others 5/1s) (SKED_JOB_DEFAULTS)")
	fs.StringVar(&o.defaultAttempts, "default-max-attempts", env("default-max-attempts", ""),
		"maxAttempts of jobs of every type --job-defaults does not name (SKED_DEFAULT_MAX_ATTEMPTS)")
	fs.StringVar(&o.defaultBackoff, "default-backoff", env("default-backoff", ""),
		"backoff of jobs of every type --job-defaults does not name (SKED_DEFAULT_BACKOFF)")
}

// apply sets c's fields from the parsed flags.
func (o *opsFlags) apply(c *serveConfig) error {
	for t := range strings.SplitSeq(o.token, ",") {
		if t = strings.TrimSpace(t); t != "" {
			c.Tokens = append(c.Tokens, t)
		}
	}
	var err error
	if c.AllowedHosts, err = parseAllowedHosts(o.allowedHosts); err != nil {
		return err
	}
	if c.Insecure, err = strconv.ParseBool(o.insecure); err != nil {
		return fmt.Errorf("--insecure %q: %w", o.insecure, err)
	}
	if c.Retention, err = time.ParseDuration(o.retention); err != nil || c.Retention < 0 {
		return fmt.Errorf("--retention %q: give a duration such as 720h, or 0 to keep everything", o.retention)
	}
	spec := o.jobDefaults
	if o.defaultAttempts != "" || o.defaultBackoff != "" {
		spec += "," + server.AnyType + "=" + o.defaultAttempts + "/" + o.defaultBackoff
	}
	if c.JobDefaults, err = server.ParseJobDefaults(spec); err != nil {
		return fmt.Errorf("--job-defaults: %w", err)
	}
	return nil
}

// parseAllowedHosts splits the value of --allowed-hosts: host names or IP
// addresses, comma-separated, each without scheme, port or wildcard.
func parseAllowedHosts(v string) ([]string, error) {
	var hosts []string
	for h := range strings.SplitSeq(v, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(h); err == nil || strings.ContainsAny(h, "/@*? ") {
			return nil, fmt.Errorf("--allowed-hosts %q: give host names such as sked.example.com, comma-separated, "+
				"without scheme, port or wildcard (every port is served)", h)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// checkExposure refuses to serve beyond loopback without a token, unless
// --insecure says so.
func (c serveConfig) checkExposure() error {
	if len(c.Tokens) > 0 || c.Insecure || isLoopback(c.Addr) {
		return nil
	}
	return fmt.Errorf("--addr %s listens beyond loopback, where anyone who can reach it could run jobs: "+
		"set a token with --token or SKED_TOKEN (clients send it as Authorization: Bearer …), "+
		"listen on 127.0.0.1, or pass --insecure to serve without authentication", c.Addr)
}

// isLoopback reports whether addr (host:port) listens on loopback only:
// localhost, 127.0.0.0/8 or ::1. An empty host listens everywhere.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// offWhenZero maps a duration flag whose 0 turns its feature off
// (--retention, --claim-ahead) to its server.Config field, where zero means
// the default and negative off.
func offWhenZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
