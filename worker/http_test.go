package worker

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sked-dev/sked/db"
)

// httpJob is a job of kind http with payload p.
func httpJob(t *testing.T, p map[string]any) *Job {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return &Job{
		ID:         "j1",
		Type:       "http",
		Payload:    raw,
		Attempt:    3,
		Generation: 9,
		Slot:       time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Output:     &Tail{Max: 4096},
	}
}

// received is what a test server saw of one request.
type received struct {
	method string
	header http.Header
	body   string
}

// newServer starts a loopback server that records each request on a channel
// and answers with status and body.
func newServer(t *testing.T, status int, body string) (*httptest.Server, <-chan received) {
	t.Helper()
	ch := make(chan received, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- received{method: r.Method, header: r.Header.Clone(), body: string(b)}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

// allowLoopback is the config of the tests that talk to their own loopback
// server.
var allowLoopback = HTTPConfig{AllowPrivate: true}

func TestHTTP(t *testing.T) {
	t.Parallel()

	t.Run("Success", func(t *testing.T) {
		t.Parallel()
		srv, reqs := newServer(t, http.StatusOK, "thanks")
		job := httpJob(t, map[string]any{"url": srv.URL + "/hook", "body": map[string]any{"n": 1}})
		if err := HTTP(allowLoopback)(context.Background(), job); err != nil {
			t.Fatalf("HTTP: %v", err)
		}
		r := <-reqs
		if r.method != http.MethodPost {
			t.Errorf("method = %s, want POST", r.method)
		}
		if got, want := r.body, `{"n":1}`; got != want {
			t.Errorf("body = %q, want %q", got, want)
		}
		for k, want := range map[string]string{
			"Content-Type":    "application/json",
			"User-Agent":      "sked",
			"Sked-Job-Id":     "j1",
			"Sked-Attempt":    "3",
			"Sked-Generation": "9",
			"Idempotency-Key": "j1:2026-01-02T03:04:05Z",
		} {
			if got := r.header.Get(k); got != want {
				t.Errorf("header %s = %q, want %q", k, got, want)
			}
		}
		if got := r.header.Get("Sked-Signature"); got != "" {
			t.Errorf("Sked-Signature = %q without a secret", got)
		}
		if got, want := job.Output.String(), "thanks"; got != want {
			t.Errorf("output = %q, want %q", got, want)
		}
	})

	t.Run("MethodHeadersNoBody", func(t *testing.T) {
		t.Parallel()
		srv, reqs := newServer(t, http.StatusNoContent, "")
		job := httpJob(t, map[string]any{
			"url":     srv.URL,
			"method":  "PUT",
			"body":    nil, // null: no body
			"headers": map[string]string{"Authorization": "Bearer x", "User-Agent": "mine"},
		})
		job.IdempotencyKey = "order-42"
		if err := HTTP(allowLoopback)(context.Background(), job); err != nil {
			t.Fatalf("HTTP: %v", err)
		}
		r := <-reqs
		if r.method != http.MethodPut || r.body != "" {
			t.Errorf("got %s with body %q, want PUT without body", r.method, r.body)
		}
		for k, want := range map[string]string{
			"Authorization":   "Bearer x",
			"User-Agent":      "mine",
			"Content-Type":    "",
			"Idempotency-Key": "order-42",
		} {
			if got := r.header.Get(k); got != want {
				t.Errorf("header %s = %q, want %q", k, got, want)
			}
		}
	})

	t.Run("Signature", func(t *testing.T) {
		t.Parallel()
		const secret = "s3cret"
		srv, reqs := newServer(t, http.StatusOK, "")
		job := httpJob(t, map[string]any{"url": srv.URL, "body": []int{1, 2}})
		if err := HTTP(HTTPConfig{AllowPrivate: true, Secret: secret})(context.Background(), job); err != nil {
			t.Fatalf("HTTP: %v", err)
		}
		r := <-reqs
		sig := r.header.Get("Sked-Signature")
		ts, v1, ok := strings.Cut(sig, ",")
		if !ok || !strings.HasPrefix(ts, "t=") || !strings.HasPrefix(v1, "v1=") {
			t.Fatalf("Sked-Signature = %q, want t=…,v1=…", sig)
		}
		ts, v1 = ts[2:], v1[3:]
		if sec, err := strconv.ParseInt(ts, 10, 64); err != nil || time.Since(time.Unix(sec, 0)).Abs() > time.Hour {
			t.Errorf("t = %q, want the current unix time", ts)
		}
		mac := hmac.New(sha256.New, []byte(secret))
		io.WriteString(mac, ts+"."+r.body)
		want := mac.Sum(nil)
		got, err := hex.DecodeString(v1)
		if err != nil || !hmac.Equal(got, want) {
			t.Errorf("v1 = %s, want %x", v1, want)
		}
	})

	t.Run("Statuses", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			status    int
			permanent bool
		}{
			{http.StatusInternalServerError, false},
			{http.StatusServiceUnavailable, false},
			{http.StatusTooManyRequests, false},
			{http.StatusNotFound, true},
			{http.StatusBadRequest, true},
		} {
			srv, _ := newServer(t, tt.status, "why: "+http.StatusText(tt.status))
			job := httpJob(t, map[string]any{"url": srv.URL + "/x"})
			err := HTTP(allowLoopback)(context.Background(), job)
			if err == nil {
				t.Fatalf("%d: HTTP succeeded", tt.status)
			}
			if got := IsPermanent(err); got != tt.permanent {
				t.Errorf("%d: IsPermanent(%v) = %v, want %v", tt.status, err, got, tt.permanent)
			}
			want := "POST " + srv.URL + "/x answered " + strconv.Itoa(tt.status) + " " + http.StatusText(tt.status)
			if err.Error() != want {
				t.Errorf("error = %q, want %q", err, want)
			}
			if got, want := job.Output.String(), "why: "+http.StatusText(tt.status); got != want {
				t.Errorf("%d: output = %q, want %q", tt.status, got, want)
			}
		}
	})

	t.Run("NetworkErrorRetries", func(t *testing.T) {
		t.Parallel()
		srv, _ := newServer(t, http.StatusOK, "")
		url := srv.URL
		srv.Close()
		err := HTTP(allowLoopback)(context.Background(), httpJob(t, map[string]any{"url": url}))
		if err == nil || IsPermanent(err) {
			t.Fatalf("HTTP = %v, want a retryable error", err)
		}
	})

	t.Run("OutputBounded", func(t *testing.T) {
		t.Parallel()
		srv, _ := newServer(t, http.StatusOK, `{"error": "quota"}`+strings.Repeat("x", 100<<10)+"end")
		job := httpJob(t, map[string]any{"url": srv.URL})
		job.Output = &Tail{Max: 1 << 20}
		if err := HTTP(allowLoopback)(context.Background(), job); err != nil {
			t.Fatalf("HTTP: %v", err)
		}
		// The beginning of the body, which the run keeps whole.
		if got := job.Output.String(); len(got) != db.OutputTailBytes || !strings.HasPrefix(got, `{"error": "quota"}`) {
			t.Errorf("output is %d bytes beginning %.20q; want the body's first %d", len(got), got, db.OutputTailBytes)
		}
	})

	t.Run("RefusesLoopback", func(t *testing.T) {
		t.Parallel()
		srv, reqs := newServer(t, http.StatusOK, "")
		port := srv.URL[strings.LastIndexByte(srv.URL, ':'):]
		// A literal address is refused before dialling; a name is refused
		// by the dialer once it resolves.
		for _, u := range []string{srv.URL, "http://localhost" + port, "http://[::ffff:127.0.0.1]" + port} {
			err := HTTP(HTTPConfig{})(context.Background(), httpJob(t, map[string]any{"url": u}))
			if !IsPermanent(err) {
				t.Fatalf("%s: HTTP = %v, want a permanent error", u, err)
			}
			var pe *PrivateTargetError
			if !errors.As(err, &pe) {
				t.Errorf("%s: error %v is not a *PrivateTargetError", u, err)
			}
			if msg := err.Error(); !strings.Contains(msg, "target 127.0.0.1 is loopback/private") || !strings.Contains(msg, "--allow-private-targets") {
				t.Errorf("%s: error = %q, want it to name the address and --allow-private-targets", u, msg)
			}
		}
		select {
		case r := <-reqs:
			t.Errorf("server got a %s request", r.method)
		default:
		}
	})

	t.Run("TrustedOrigin", func(t *testing.T) {
		t.Parallel()
		srv, reqs := newServer(t, http.StatusOK, "")
		port := srv.URL[strings.LastIndexByte(srv.URL, ':'):]
		// The operator's sink on loopback is called, at any path; another
		// port of the same host is not trusted.
		trusted := NewOrigins(srv.URL + "/hook?topic=x")
		for _, u := range []string{srv.URL + "/other", "http://127.0.0.1" + port} {
			if err := HTTP(HTTPConfig{Trusted: trusted})(context.Background(), httpJob(t, map[string]any{"url": u})); err != nil {
				t.Fatalf("%s, a trusted origin: HTTP = %v", u, err)
			}
			<-reqs
			if err := RefusePrivateTarget(json.RawMessage(`{"url": "`+u+`"}`), trusted); err != nil {
				t.Errorf("RefusePrivateTarget(%s, a trusted origin) = %v", u, err)
			}
		}
		n, _ := strconv.Atoi(port[1:])
		other := "http://127.0.0.1:" + strconv.Itoa(n%65535+1)
		if err := HTTP(HTTPConfig{Trusted: trusted})(context.Background(), httpJob(t, map[string]any{"url": other})); !errors.As(err, new(*PrivateTargetError)) {
			t.Errorf("%s, another port: HTTP = %v; want it refused", other, err)
		}
		if err := RefusePrivateTarget(json.RawMessage(`{"url": "`+other+`"}`), trusted); err == nil {
			t.Errorf("RefusePrivateTarget(%s, another port) took it", other)
		}
	})

	t.Run("TrustedOriginRedirects", func(t *testing.T) {
		t.Parallel()
		// A trusted sink may redirect within its origin, not out of it:
		// it must not lead a job to an address the job could not call.
		other, otherReqs := newServer(t, http.StatusOK, "")
		sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/away":
				http.Redirect(w, r, other.URL+"/metadata", http.StatusFound)
			case "/here":
				http.Redirect(w, r, "/ok", http.StatusFound)
			}
		}))
		t.Cleanup(sink.Close)
		cfg := HTTPConfig{Trusted: NewOrigins(sink.URL)}
		if err := HTTP(cfg)(context.Background(), httpJob(t, map[string]any{"url": sink.URL + "/here"})); err != nil {
			t.Errorf("a redirect within the trusted origin: %v", err)
		}
		err := HTTP(cfg)(context.Background(), httpJob(t, map[string]any{"url": sink.URL + "/away"}))
		if !IsPermanent(err) || !strings.Contains(err.Error(), "out of the trusted notification sink's origin") {
			t.Errorf("a redirect out of the trusted origin: %v; want it refused, permanently", err)
		}
		select {
		case r := <-otherReqs:
			t.Errorf("the other server got a %s request", r.method)
		default:
		}
	})

	t.Run("Redirects", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			if n >= 5 {
				io.WriteString(w, "arrived")
				return
			}
			if r.URL.Query().Get("loop") != "" {
				http.Redirect(w, r, "/?loop=1&n="+strconv.Itoa(n), http.StatusTemporaryRedirect)
				return
			}
			http.Redirect(w, r, "/?n="+strconv.Itoa(n+1), http.StatusTemporaryRedirect)
		}))
		t.Cleanup(srv.Close)

		job := httpJob(t, map[string]any{"url": srv.URL + "/?n=0"})
		if err := HTTP(allowLoopback)(context.Background(), job); err != nil {
			t.Fatalf("5 redirects: HTTP = %v", err)
		}
		if got := job.Output.String(); got != "arrived" {
			t.Errorf("output = %q, want %q", got, "arrived")
		}
		err := HTTP(allowLoopback)(context.Background(), httpJob(t, map[string]any{"url": srv.URL + "/?loop=1"}))
		if !errors.Is(err, errTooManyRedirects) || !IsPermanent(err) {
			t.Errorf("redirect loop: HTTP = %v, want permanent %v", err, errTooManyRedirects)
		}
	})

	// A redirect to another origin (here another port of the same host,
	// which the client itself treats as the same) does not carry the
	// payload's headers nor the signature, which are for the job's target;
	// one from https to http is not followed.
	t.Run("RedirectKeepsSecretsHome", func(t *testing.T) {
		t.Parallel()
		got := make(chan http.Header, 1)
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
		t.Cleanup(other.Close)
		first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/stolen", http.StatusTemporaryRedirect)
		}))
		t.Cleanup(first.Close)
		cfg := allowLoopback
		cfg.Secret = "s3cret"
		job := httpJob(t, map[string]any{"url": first.URL, "headers": map[string]string{"Authorization": "Bearer AUTH", "X-Api-Key": "KEY"}})
		if err := HTTP(cfg)(context.Background(), job); err != nil {
			t.Fatalf("HTTP = %v", err)
		}
		h := <-got
		for _, secret := range []string{"Authorization", "X-Api-Key", "Sked-Signature"} {
			if v := h.Get(secret); v != "" {
				t.Errorf("the redirected request carried %s: %q", secret, v)
			}
		}
		if h.Get("Sked-Job-Id") != job.ID {
			t.Errorf("the redirected request lost Sked-Job-Id: %v", h)
		}

		plain, err := http.NewRequest(http.MethodGet, "http://example.com/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := keepSecretsHome(plain, &url.URL{Scheme: "https", Host: "example.com"}); err == nil || !IsPermanent(err) {
			t.Errorf("a redirect from https to http: %v; want it refused, permanent", err)
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(release) })
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		err := HTTP(allowLoopback)(ctx, httpJob(t, map[string]any{"url": srv.URL}))
		if !errors.Is(err, context.DeadlineExceeded) || IsPermanent(err) {
			t.Fatalf("HTTP = %v, want a retryable context.DeadlineExceeded", err)
		}
	})

	t.Run("BadPayload", func(t *testing.T) {
		t.Parallel()
		err := HTTP(allowLoopback)(context.Background(), httpJob(t, map[string]any{"url": "/relative"}))
		if !IsPermanent(err) {
			t.Fatalf("HTTP = %v, want a permanent error", err)
		}
	})
}

func TestGuardControl(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		address string
		refused bool
	}{
		{"127.0.0.1:80", true},
		{"[::1]:443", true},
		{"[fe80::1%eth0]:80", true},
		{"10.1.2.3:8080", true},
		{"[::ffff:192.168.1.1]:80", true},
		{"8.8.8.8:53", false},
		{"[2606:4700::1111]:443", false},
	} {
		err := guardControl("tcp", tt.address, nil)
		var pe *PrivateTargetError
		if got := errors.As(err, &pe); got != tt.refused {
			t.Errorf("guardControl(%s) = %v, want refused %v", tt.address, err, tt.refused)
		}
	}
}
