// Package web is sked's dashboard: a single page of plain HTML, CSS and
// JavaScript modules embedded in the binary (no build step, no CDN; it works
// offline), and the Sampler that keeps the last hour of the queue's history
// in memory for its charts.
//
// The page reads the JSON API (GET jobs…, stats, stats/series, workers,
// jobs/{id}/preview, POST schedules/check) like any other client, and
// changes jobs through it. Every address it uses is relative to the page,
// so the dashboard and the API work together under any path prefix: mount
// Mount's handler with http.StripPrefix("/sked", …) and open /sked/. The
// assets themselves carry no data and are served without auth; when the
// API answers 401 the page asks for a bearer token once, keeps it in
// sessionStorage and sends it on every call.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"net/url"
	"path"
)

//go:embed static
var static embed.FS

// methodNotAllowed is what an api passed to Mount may implement
// (handlers.API does) to answer a method the dashboard's paths do not
// serve as it answers one its own paths do not.
type methodNotAllowed interface {
	MethodNotAllowed(w http.ResponseWriter, r *http.Request, allowed ...string)
}

// Mount returns a handler that serves the dashboard on GET / (index.html)
// and GET /ui/… (the other files), and everything else by api. The assets
// are public; api keeps whatever auth it has. Another method on / or
// /ui/… answers 405 with Allow: GET, HEAD through api's
// MethodNotAllowed(w, r, allowed...) when it has one (handlers.API), as
// the API answers a method its paths do not serve; it goes to api when it
// has none. Under a prefix (behind http.StripPrefix("/sked", …)) a
// request for the prefix itself, which arrives with an empty path, is
// sent on to the prefix with a slash, where the page's relative addresses
// resolve.
func Mount(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	ui := assets()
	mux.Handle("GET /{$}", ui)
	mux.Handle("GET /ui/", ui)
	if na, ok := api.(methodNotAllowed); ok {
		readOnly := func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Content-Type-Options", "nosniff")
			na.MethodNotAllowed(w, r, http.MethodGet, http.MethodHead)
		}
		mux.HandleFunc("/{$}", readOnly)
		mux.HandleFunc("/ui/", readOnly)
	}
	mux.Handle("/", api)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			toSlash(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// toSlash redirects a request for a prefix without its final slash
// ("/sked") to the prefix with one, by a relative address ("./sked/"), since
// what the prefix is was stripped from the request's URL.
func toSlash(w http.ResponseWriter, r *http.Request) {
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil || path.Base(u.Path) == "/" || path.Base(u.Path) == "." {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Location", "./"+url.PathEscape(path.Base(u.Path))+"/")
	w.WriteHeader(http.StatusMovedPermanently)
}

// assets serves the embedded files: index.html at /, the rest under /ui/.
func assets() http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic("web: embedded static directory missing: " + err.Error())
	}
	ui := http.StripPrefix("/ui/", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The files carry no modification time; revalidate so that a new
		// binary's page is never mixed with an old script.
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		// No page of another origin may frame the dashboard: its buttons
		// (cancel, retry, bulk actions) send same-origin requests, which
		// pass the API's cross-origin check, so a framing page could
		// trick its user into clicking them (clickjacking).
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'self'; base-uri 'none'; form-action 'self'")
		w.Header().Set("X-Frame-Options", "SAMEORIGIN")
		switch r.URL.Path {
		case "/":
			http.ServeFileFS(w, r, files, "index.html")
			return
		case "/ui/", "/ui/index.html":
			// The page works only at /, where its relative addresses
			// resolve; "../" is / under any prefix.
			w.Header().Set("Location", "../")
			w.WriteHeader(http.StatusMovedPermanently)
			return
		}
		ui.ServeHTTP(w, r)
	})
}
