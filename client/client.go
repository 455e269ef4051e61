// Package client is a Go client of sked's HTTP API. Its worker methods
// (RunClaim, RunHeartbeat, RunFinish) satisfy worker.Store, so a worker.Pool
// runs jobs claimed from a sked server on another machine exactly as it runs
// them in-process; `sked work` is that pool.
package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/internal/clip"
	"github.com/sked-dev/sked/wire"
)

// Client talks to a sked server, or to one at a time of several that share
// a database. Its zero value is not usable: set BaseURL. It is safe for
// concurrent use once its fields are set.
type Client struct {
	// BaseURL is the server's root, e.g. "http://sked.lan:8080".
	BaseURL string
	// Fallbacks are the roots of more servers on BaseURL's database (sked
	// on PostgreSQL), any of which serves any request. Requests go to one
	// server at a time, BaseURL first. A request that gets no answer (the
	// server cannot be reached, or it did not answer in time) or a 503
	// (shutting down, overloaded) moves the client on to the next server,
	// round robin, and is sent again there, once to each server at most,
	// while its context lasts (each server has an equal share of the time
	// left); later requests go to the new server. Any other answer, a 4xx
	// included, is the answer. A request may so reach two servers: as with
	// any retry, give created jobs an idempotency key.
	Fallbacks []string
	// Token is sent as "Authorization: Bearer <Token>" when not empty,
	// without white space around it (a token read from a file keeps its
	// line end; no token holds white space).
	Token string
	// HTTP sends the requests; nil means http.DefaultClient. Do not give it
	// a Timeout shorter than a claim's wait: requests are bounded by their
	// context instead.
	HTTP *http.Client
	// ClaimWait is how long RunClaim asks the server to wait for a due job;
	// zero means wire.DefaultClaimWait.
	ClaimWait time.Duration
	// Actor, when not empty, is sent as the Sked-Actor header: who makes
	// the changes, e.g. "ann@laptop", which the server records on the
	// job's timeline with the client's address.
	Actor string
	// Logger, when not nil, logs each move to another server (see
	// Fallbacks) at WARN, with the server and the error that caused it.
	Logger *slog.Logger
	// NoAnswerLimit is how long a wait (JobWait, TriggeredRunWait) goes on
	// asking a server that gives no answer, since its last answer (a 503
	// is one) or the wait's start, before it gives up with ErrNoAnswer;
	// zero means DefaultNoAnswerLimit.
	NoAnswerLimit time.Duration

	current     atomic.Int64           // the server requests go to: 0 is BaseURL, i is Fallbacks[i-1]
	claimFailed atomic.Bool            // the last RunClaim failed; see NextDue
	claimLost   atomic.Pointer[string] // the id of a claim that got no answer since the last that did; see wire.ClaimResendHeader
	claimAfter  atomic.Int64           // no claim is sent before this (Unix ns): the last one's Retry-After
}

// Error is an answer of the server with a status of 400 or more, from its
// problem+json body. It unwraps to db.ErrNotFound (404), db.ErrConflict
// (409) or db.ErrInvalid (400, 422), so callers branch as on a db.Store.
type Error struct {
	Status int    // HTTP status code
	Detail string // what the server said is wrong
	Field  string // the bad input, when the server named one
	// Extensions are the members of the server's problem+json beside the
	// standard ones (type, title, status, detail, instance), as it sent
	// them: sked's field, and on a 409 about a job its state and, when a
	// worker holds the job, the live run. Nil when the answer was no
	// problem+json document.
	Extensions map[string]json.RawMessage
	// RetryAfter is how long the server asked to wait before trying again
	// (its Retry-After header), such as on a 503; zero when it did not say.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap maps the status to the db error it stands for.
func (e *Error) Unwrap() error {
	switch e.Status {
	case http.StatusNotFound:
		return db.ErrNotFound
	case http.StatusConflict:
		return db.ErrConflict
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return db.ErrInvalid
	}
	return nil
}

// do sends method path with body as JSON (none when body is nil) and decodes
// a 2xx answer into out (unless out is nil). An answer of 400 or more is an
// *Error; a failure to reach the server or read its answer is wrapped with
// the request it was.
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	_, err := c.doResponse(ctx, method, path, body, out)
	return err
}

// doResponse is do that also returns the 2xx answer, its body consumed, for
// callers that need its status or headers.
func (c *Client) doResponse(ctx context.Context, method, path string, body, out any) (*http.Response, error) {
	return c.send(ctx, method, path, "application/json", body, out)
}

// send is doResponse with a body of media type contentType, sent to the
// current server and, when that fails (see Fallbacks), to the next ones.
// When ctx has a deadline, each attempt has an equal share of the time
// left among the servers still to try, so that a server that does not
// answer leaves the next ones time.
func (c *Client) send(ctx context.Context, method, path, contentType string, body, out any) (*http.Response, error) {
	if c.BaseURL == "" {
		return nil, errors.New("client: BaseURL is not set; give the server's root, such as http://127.0.0.1:8080")
	}
	var b []byte
	if body != nil {
		var err error
		if b, err = wire.Marshal(body); err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
	}
	servers := 1 + len(c.Fallbacks)
	for tried := 1; ; tried++ {
		i := c.current.Load()
		actx, cancel := ctx, context.CancelFunc(func() {})
		if end, ok := ctx.Deadline(); ok && tried < servers {
			actx, cancel = context.WithTimeout(ctx, time.Until(end)/time.Duration(servers-tried+1))
		}
		resp, err := c.sendTo(actx, c.server(i), method, path, contentType, b, out)
		cancel()
		if servers == 1 || !failsOver(ctx, err) {
			return resp, err
		}
		c.moveOn(i, err)
		if tried == servers || ctx.Err() != nil {
			return resp, err
		}
	}
}

// Server is the root of the server that requests go to now: BaseURL, or
// one of Fallbacks after a failure of the others.
func (c *Client) Server() string {
	return c.server(c.current.Load())
}

// server is the root of server i: 0 is BaseURL, i is Fallbacks[i-1].
func (c *Client) server(i int64) string {
	if i == 0 {
		return c.BaseURL
	}
	return c.Fallbacks[i-1]
}

// failsOver says whether a request's error is the server's failure rather
// than an answer: no answer, for another reason than the end of ctx by its
// caller, or a 503.
func failsOver(ctx context.Context, err error) bool {
	if apiErr := (*Error)(nil); errors.As(err, &apiErr) {
		return apiErr.Status == http.StatusServiceUnavailable
	}
	return errors.As(err, new(*url.Error)) && !errors.Is(ctx.Err(), context.Canceled)
}

// moveOn makes the server after i the current one, unless another request
// has moved the client on from i already, and logs the move.
func (c *Client) moveOn(i int64, err error) {
	next := (i + 1) % int64(1+len(c.Fallbacks))
	if c.current.CompareAndSwap(i, next) && c.Logger != nil {
		c.Logger.Warn("moved to another server", "server", c.server(next), "from", c.server(i), "err", err)
	}
}

// claimSent, in the context of a claim's request (claimKey), names the
// claim (wire.ClaimIDHeader) and hears which server the request was last
// written to in full: a stop must end the claim where it waits (see
// RunClaimWaited).
type claimSent struct {
	id     string // immutable
	resend string // immutable: the claim it resends, see wire.ClaimResendHeader
	mu     sync.Mutex
	server string // "": not written yet; guarded by mu
}

type claimKey struct{}

func (c *claimSent) to(server string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.server = server
}

// where is the server the claim was written to, "" before it was.
func (c *claimSent) where() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.server
}

// sendTo sends the request with body b (none when nil) to the server at
// root base.
func (c *Client) sendTo(ctx context.Context, base, method, path, contentType string, b []byte, out any) (*http.Response, error) {
	var rd io.Reader
	if b != nil {
		rd = bytes.NewReader(b)
	}
	claim, _ := ctx.Value(claimKey{}).(*claimSent)
	if claim != nil {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				claim.to(base)
			}
		}})
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(base, "/")+path, rd)
	if err != nil {
		return nil, fmt.Errorf("build %s %s: %w", method, path, err)
	}
	if claim != nil {
		req.Header.Set(wire.ClaimIDHeader, claim.id)
		if claim.resend != "" {
			req.Header.Set(wire.ClaimResendHeader, claim.resend)
		}
	}
	if b != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if token := strings.TrimSpace(c.Token); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if c.Actor != "" {
		req.Header.Set(wire.ActorHeader, c.Actor)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return nil, responseError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); !strings.HasSuffix(mt, "json") {
			return nil, fmt.Errorf("%s %s: %w", method, path, &NotSkedError{Host: resp.Request.URL.Host, What: cmp.Or(mt, "no content type")})
		}
		return nil, fmt.Errorf("read answer of %s %s: %w", method, path, err)
	}
	return resp, nil
}

// responseError reads a problem+json body into an *Error; any other body
// becomes its detail, shortened.
func responseError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var members map[string]json.RawMessage
	// sked's refusals are problem+json; a problem sent as plain JSON still
	// has its status.
	parsed := (mt == "application/problem+json" || mt == "application/json") && json.Unmarshal(b, &members) == nil
	if parsed && (mt == "application/problem+json" || members["status"] != nil) {
		_ = json.Unmarshal(members["detail"], &e.Detail)
		_ = json.Unmarshal(members["field"], &e.Field)
		for _, std := range problemMembers {
			delete(members, std)
		}
		if len(members) > 0 {
			e.Extensions = members
		}
		return e
	}
	// sked's refusals are all problem+json that says why; anything else is
	// another server's answer.
	what, status := "", strconv.Itoa(resp.StatusCode)+" "+http.StatusText(resp.StatusCode)
	switch text := strings.TrimSpace(string(b)); {
	case mt == "text/html":
		what = "an HTML page (" + status + ")"
	case text == "":
		what = "an empty " + strconv.Itoa(resp.StatusCode) + " response"
	case mt == "text/plain" || mt == "":
		what = "plain text (" + status + `: "` + clip.Runes(text, 80) + `")`
	case mt == "application/json":
		what = "JSON that is no problem report (" + status + ": " + clip.Runes(text, 80) + ")"
	}
	if what != "" && resp.Request != nil {
		e.Detail = notSked(resp.Request.URL.Host, what)
		if e.Status >= 500 { // a proxy's while sked is down: an answer to retry
			return e
		}
		return &NotSkedError{Host: resp.Request.URL.Host, What: what, Refusal: e}
	}
	e.Detail = clip.Runes(strings.TrimSpace(string(b)), 200)
	return e
}

// problemMembers are the standard members of an RFC 9457 problem; the
// others are extensions (Error.Extensions).
var problemMembers = []string{"type", "title", "status", "detail", "instance"}

// NotSkedError is the error of a request answered with success, or
// refused with a 4xx, but not with sked's JSON (an HTML page, plain text,
// nothing): what answers at the address is not sked's API, such as
// another web server, or sked's dashboard reached through an address with
// a #/… part, which the paths of the API do not follow.
type NotSkedError struct {
	Host string // the host (and port) that answered
	What string // what it answered with
	// Refusal is the 4xx it answered with, which IsStatus and errors.As
	// find through Unwrap; nil for a success.
	Refusal *Error
}

func (e *NotSkedError) Error() string { return notSked(e.Host, e.What) }

// Unwrap returns the 4xx answered, if any.
func (e *NotSkedError) Unwrap() error {
	if e.Refusal == nil {
		return nil
	}
	return e.Refusal
}

// notSked says that host answered with what, which sked does not send.
func notSked(host, what string) string {
	return fmt.Sprintf("%s answered with %s, not sked's JSON: is it a sked server? Check the server's address (--server, SKED_SERVER); "+
		"a proxy in front of sked answers so while sked is down", host, what)
}

// retryAfter reads a Retry-After value, delay-seconds or an HTTP date, as
// the wait from now it asks for; zero when absent, malformed or past.
func retryAfter(v string, now time.Time) time.Duration {
	if secs, err := strconv.Atoi(v); err == nil {
		return max(time.Duration(secs)*time.Second, 0)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// IsStatus reports whether err is an *Error with the given status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}
