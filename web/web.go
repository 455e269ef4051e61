// Package web is sked's dashboard: a single page of plain HTML, CSS and
// JavaScript modules embedded in the binary (no build step, no CDN; it works
// offline), and the Sampler that keeps the last hour of the queue's history
// in memory for its charts.
//
// The page reads the JSON API (GET /jobs…, /stats, /stats/series,
// /jobs/{id}/preview, POST /schedules/check) like any other client. The
// assets themselves carry no data and are served without auth; when the API
// answers 401 the page asks for a bearer token once, keeps it in
// sessionStorage and sends it on every call.
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Mount returns a handler that serves the dashboard on GET / (index.html)
// and GET /ui/… (the other files), and everything else by api. The assets
// are public; api keeps whatever auth it has.
func Mount(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	ui := assets()
	mux.Handle("GET /{$}", ui)
	mux.Handle("GET /ui/", ui)
	mux.Handle("/", api)
	return mux
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
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:")
		if r.URL.Path == "/" {
			http.ServeFileFS(w, r, files, "index.html")
			return
		}
		ui.ServeHTTP(w, r)
	})
}
