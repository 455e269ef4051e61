package web

import (
	"net/url"
	"strings"
)

// JobURL returns the address of job id's page on the dashboard served at
// base, the address people open it at ("https://sked.example.com" or, behind
// a proxy, "https://example.com/sked/"); for an empty id, the dashboard's
// front page. The page is the route "#/jobs/{id}" of app.js.
func JobURL(base, id string) string {
	base = strings.TrimSuffix(base, "/") + "/"
	if id == "" {
		return base
	}
	return base + "#/jobs/" + url.PathEscape(id)
}
