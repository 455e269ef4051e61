package worker

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sked-dev/sked/db"
)

const (
	// maxResponseBody is how much of a response body is read into the job's
	// output, its beginning, which a run keeps whole (db.OutputTailBytes);
	// the rest is left unread.
	maxResponseBody = db.OutputTailBytes
	// maxRedirects is how many redirects the built-in client follows.
	maxRedirects = 5
)

// errTooManyRedirects stops the built-in client at maxRedirects.
var errTooManyRedirects = fmt.Errorf("stopped after %d redirects", maxRedirects)

// HTTPPayload is the payload of kind "http".
type HTTPPayload struct {
	// URL is the absolute http:// or https:// URL requested. Required.
	URL string `json:"url"`
	// Method is the request method; empty means POST.
	Method string `json:"method,omitempty"`
	// Headers are added to the request. They may override User-Agent and
	// Content-Type; they may not set the headers sked sets itself (Sked-*,
	// Idempotency-Key) or the framing ones (Host, Content-Length,
	// Transfer-Encoding, Connection).
	Headers map[string]string `json:"headers,omitempty"`
	// Body is any JSON value, sent byte for byte as the request body.
	// Absent or null means no body.
	Body json.RawMessage `json:"body,omitempty"`
}

// HTTPConfig configures kind "http".
type HTTPConfig struct {
	// AllowPrivate allows targets that PublicAddr rejects: loopback, private,
	// link-local, unspecified and other non-public addresses. It is set by
	// sked serve --allow-private-targets.
	AllowPrivate bool
	// Trusted are origins called whatever their addresses, also when
	// private targets are refused: those of the server's own notification
	// sinks (sked serve --notify), which its operator chose, and which in a
	// home or office network are mostly on it.
	Trusted Origins
	// Secret, when set, signs every request (see HTTP).
	Secret string
	// Client sends the requests. Nil means a client built by HTTP whose
	// dialer refuses non-public addresses unless AllowPrivate, that follows
	// at most 5 redirects and ignores proxy settings (a proxy would hide the
	// target from the guard). A non-nil Client is used as is: only URLs whose
	// host is a literal IP address are then checked against AllowPrivate.
	Client *http.Client
}

// HTTP returns the handler of kind "http". It sends the request the payload
// describes (see HTTPPayload) with these headers:
//
//	User-Agent: sked (unless the payload sets it)
//	Content-Type: application/json (when there is a body, unless the payload sets it)
//	Sked-Job-Id, Sked-Attempt, Sked-Generation: who the run is
//	Idempotency-Key: the job's idempotency key when it has one, else
//	    "<job id>:<slot in RFC 3339, UTC>", the same for every attempt of one
//	    firing and different for the next firing of a recurring job
//	Sked-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>, when cfg.Secret is set
//
// The signature is the HMAC-SHA256 under cfg.Secret of the decimal t, a dot,
// and the body bytes exactly as sent ("<t>." alone when there is no body), as
// Stripe signs webhooks; a receiver recomputes it, compares in constant time
// and refuses stale t to stop replays.
//
// A 2xx answer succeeds. A 5xx or 429 answer, or a network error, is a
// retryable error; any other answer ("POST https://example.com/hook answered
// 404 Not Found"), a payload that does not validate, a refused target and too
// many redirects are Permanent errors. The first 4 KiB of the response body
// are written to job.Output. The request is bound to ctx, and the error of a
// request cut short by ctx wraps ctx.Err().
//
// Unless cfg.AllowPrivate, a target whose address PublicAddr rejects is
// refused with a *PrivateTargetError; the built-in client checks every
// address it connects to, after name resolution and on every redirect. A
// target of a trusted origin (cfg.Trusted) is not checked; a redirect out
// of the trusted origins is refused.
func HTTP(cfg HTTPConfig) HandlerFunc {
	guarded, open := cfg.Client, cfg.Client
	if guarded == nil {
		guarded = newHTTPClient(cfg.AllowPrivate)
		if len(cfg.Trusted) > 0 {
			open = newHTTPClient(true)
			open.CheckRedirect = stayWithin(cfg.Trusted, open.CheckRedirect)
		}
	}
	return func(ctx context.Context, job *Job) error {
		var p HTTPPayload
		if err := parseHTTPPayload(job.Payload, &p); err != nil {
			return Permanent(err)
		}
		method := cmp.Or(p.Method, http.MethodPost)
		u, err := url.Parse(p.URL)
		if err != nil { // parseHTTPPayload checked it
			return Permanent(fmt.Errorf("parse url: %w", err))
		}
		target := method + " " + u.Redacted()
		client, allowPrivate := guarded, cfg.AllowPrivate
		if cfg.Trusted.Has(u) {
			client, allowPrivate = open, true
		}
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil && !allowPrivate && !PublicAddr(ip) {
			return Permanent(fmt.Errorf("%s: %w", target, &PrivateTargetError{Addr: ip.Unmap()}))
		}

		var body []byte
		var bodyReader io.Reader
		if len(p.Body) > 0 && string(p.Body) != "null" {
			body = p.Body
			bodyReader = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, u.String(), bodyReader)
		if err != nil {
			return Permanent(fmt.Errorf("%s: %w", target, err))
		}
		for k, v := range p.Headers {
			req.Header.Set(k, v)
		}
		if req.Header.Get("User-Agent") == "" {
			req.Header.Set("User-Agent", "sked")
		}
		if body != nil && req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Sked-Job-Id", job.ID)
		req.Header.Set("Sked-Attempt", strconv.Itoa(job.Attempt))
		req.Header.Set("Sked-Generation", strconv.FormatInt(job.Generation, 10))
		req.Header.Set("Idempotency-Key", idempotencyKey(job))
		if cfg.Secret != "" {
			req.Header.Set("Sked-Signature", sign(cfg.Secret, time.Now(), body))
		}

		resp, err := client.Do(req)
		if err != nil {
			var pe *PrivateTargetError
			if errors.As(err, &pe) {
				return Permanent(fmt.Errorf("%s: %w", target, pe))
			}
			if errors.Is(err, errTooManyRedirects) || errors.As(err, new(*leftTrustedError)) {
				return Permanent(err)
			}
			return err
		}
		defer resp.Body.Close()
		if job.Output != nil {
			// A body cut short does not change what the status said.
			_, _ = io.Copy(job.Output, io.LimitReader(resp.Body, maxResponseBody))
		}

		switch code := resp.StatusCode; {
		case code >= 200 && code < 300:
			return nil
		case code == http.StatusTooManyRequests || code >= 500:
			return fmt.Errorf("%s answered %s", target, resp.Status)
		default:
			return Permanent(fmt.Errorf("%s answered %s", target, resp.Status))
		}
	}
}

// stayWithin is a CheckRedirect that refuses a redirect out of the trusted
// origins, whose requests go unguarded, and otherwise asks next: a trusted
// sink's host must not lead a job to addresses it could not call itself.
func stayWithin(trusted Origins, next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if !trusted.Has(req.URL) {
			return &leftTrustedError{URL: req.URL.Redacted()}
		}
		return next(req, via)
	}
}

// leftTrustedError refuses a redirect from a trusted origin to another.
type leftTrustedError struct{ URL string }

func (e *leftTrustedError) Error() string {
	return "redirected to " + e.URL + ", out of the trusted notification sink's origin; not followed"
}

// newHTTPClient builds the default client of kind "http".
func newHTTPClient(allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = guardControl
	}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
	}
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return errTooManyRedirects
			}
			return keepSecretsHome(req, via[0].URL)
		},
	}
}

// sentOnAnywhere are the headers of an http job's request that a redirect
// to another origin still carries: what describes the request and the run.
// The payload's other headers (a token, an API key) and Sked-Signature are
// for the job's target alone.
var sentOnAnywhere = []string{"Content-Type", "User-Agent", "Accept", "Sked-Job-Id", "Sked-Attempt", "Sked-Generation", "Idempotency-Key"}

// keepSecretsHome refuses a redirect of a job's request from https to
// plain http, and strips the headers not in sentOnAnywhere from one to
// another origin (scheme, host and port) than first, the job's URL: the
// client itself drops only Authorization and Cookie, and only for another
// host name.
func keepSecretsHome(req *http.Request, first *url.URL) error {
	if first.Scheme == "https" && req.URL.Scheme != "https" {
		return Permanent(fmt.Errorf("redirected from https to %s; not followed, so that the request is not sent in the clear", req.URL.Redacted()))
	}
	if req.URL.Scheme == first.Scheme && req.URL.Host == first.Host {
		return nil
	}
	for name := range req.Header {
		if !slices.Contains(sentOnAnywhere, http.CanonicalHeaderKey(name)) {
			req.Header.Del(name)
		}
	}
	return nil
}

// sign returns the Sked-Signature header value for body sent at t.
func sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// reservedHeaders are the request headers a payload may not set.
var reservedHeaders = map[string]string{
	"Idempotency-Key":   "it is set by sked",
	"Host":              "it comes from the url",
	"Content-Length":    "it comes from the body",
	"Transfer-Encoding": "it comes from the body",
	"Connection":        "it is managed by the client",
}

// parseHTTPPayload decodes and checks an http payload; its errors are
// *db.ValidationError.
func parseHTTPPayload(raw []byte, p *HTTPPayload) error {
	const example = `{"url": "https://example.com/hook", "method": "POST", "headers": {"Authorization": "Bearer …"}, "body": {"any": "json"}}`
	if err := decodeStrict(raw, p, "http", example, "url", "method", "headers", "body"); err != nil {
		return err
	}
	if p.URL == "" {
		return &db.ValidationError{Field: "payload.url", Msg: "is required: the http:// or https:// URL to request"}
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		return &db.ValidationError{Field: "payload.url", Msg: fmt.Sprintf("%q is not a URL: %v", p.URL, errors.Unwrap(err))}
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return &db.ValidationError{Field: "payload.url", Msg: fmt.Sprintf("%q must be an absolute http:// or https:// URL with a host", u.Redacted())}
	}
	if p.Method != "" && !isToken(p.Method) {
		return &db.ValidationError{Field: "payload.method", Msg: fmt.Sprintf("%q is not an HTTP method; use e.g. POST, PUT or GET", p.Method)}
	}
	for k, v := range p.Headers {
		ck := http.CanonicalHeaderKey(k)
		switch {
		case !isToken(k):
			return &db.ValidationError{Field: "payload.headers", Msg: fmt.Sprintf("%q is not a valid header name", k)}
		case strings.HasPrefix(ck, "Sked-"):
			return &db.ValidationError{Field: "payload.headers", Msg: fmt.Sprintf("%s: headers starting with Sked- are set by sked", ck)}
		case reservedHeaders[ck] != "":
			return &db.ValidationError{Field: "payload.headers", Msg: fmt.Sprintf("%s may not be set: %s", ck, reservedHeaders[ck])}
		case strings.ContainsAny(v, "\r\n\x00"):
			return &db.ValidationError{Field: "payload.headers", Msg: fmt.Sprintf("the value of %s contains a line break or NUL", ck)}
		}
	}
	return nil
}

// isToken reports whether s is an RFC 9110 token, the syntax of methods and
// header names.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
