package handlers

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// A browser sends requests for any page its user opens, so a page of another
// site could use a sked on the same machine. Two checks stop that:
//
//   - A request that changes something and that a browser marks as coming
//     from another origin (Sec-Fetch-Site other than same-origin or none,
//     or an Origin that is not the Host) is refused: a form post, a no-cors
//     fetch or a beacon of another site's page.
//   - Without a token only loopback Host names are served (and the ones the
//     operator allows), so a page whose own DNS name was rebound to
//     127.0.0.1 (DNS rebinding) is answered nothing. The Origin a browser
//     sends with every change must name one of them too: a reverse proxy
//     that passes its own Host upstream hides the rebound name there, not
//     in Origin.
//
// Programs (curl, sked add, sked work, the client package) send neither
// Origin nor Sec-Fetch-Site, and the dashboard's own fetches are
// same-origin; both pass.

// refuseCrossOrigin answers 403 to a state-changing request a browser sent
// for a page of another origin. GET, HEAD and OPTIONS always pass.
func (h *handler) refuseCrossOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cop.Check(r) == nil {
			next.ServeHTTP(w, r)
			return
		}
		marker := "Sec-Fetch-Site: " + r.Header.Get("Sec-Fetch-Site")
		if r.Header.Get("Sec-Fetch-Site") == "" {
			marker = fmt.Sprintf("Origin %s, Host %s", r.Header.Get("Origin"), r.Host)
		}
		h.error(w, r, &requestError{Status: http.StatusForbidden, Msg: "a page of another origin sent this request (" + marker +
			"); sked refuses changes asked by pages it did not serve, so that a web page cannot create or alter jobs: " +
			"use the dashboard at this server's own address, or call the API from a program (curl, sked add)"})
	})
}

// checkHost answers 403 when there are no tokens and the request's Host, or
// the host of the Origin of a request that changes something, is neither a loopback name nor
// one of h.allowedHosts. The health probes answer any Host, as they answer
// without a token.
func (h *handler) checkHost(next http.Handler) http.Handler {
	if len(h.tokens) > 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		switch {
		case publicPaths[r.URL.Path]:
		case !h.servesHost(r.Host):
			h.error(w, r, &requestError{Status: http.StatusForbidden, Msg: fmt.Sprintf("Host %q is not served: "+
				"without a token this server answers only the Host names localhost, 127.0.0.1 and [::1] (any port) "+
				"and those given with --allowed-hosts, so that a web page cannot reach it through a DNS name rebound to this machine; "+
				"use one of those names, add this one with --allowed-hosts (SKED_ALLOWED_HOSTS) when a proxy forwards it, "+
				"or set a token with --token", r.Host)})
			return
		case origin != "" && !safeMethod(r.Method) && !h.servesOrigin(origin):
			h.error(w, r, &requestError{Status: http.StatusForbidden, Msg: fmt.Sprintf("the page that sent this request is at Origin %q, "+
				"which is not served: without a token this server answers only pages at localhost, 127.0.0.1 and [::1] "+
				"and at the names given with --allowed-hosts, so that a web page cannot reach it through a DNS name rebound to this machine "+
				"(here, through a proxy that passes its own Host); add the name the browser uses with --allowed-hosts (SKED_ALLOWED_HOSTS), "+
				"or set a token with --token", origin)})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// safeMethod reports whether method changes nothing (RFC 9110 9.2.1). A
// browser sends no Origin with a page's own such requests, so the Origin
// check cannot cover them: a rebound page behind a proxy that passes its
// own Host reads what the API answers (operations.md says to pass the
// Host, or set a token).
func safeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// servesOrigin reports whether origin (an Origin header, such as
// "http://localhost:8080") is at a host servesHost serves; "null" and
// anything without a host are not.
func (h *handler) servesOrigin(origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && h.servesHost(u.Host)
}

// servesHost reports whether hostport (a Host header) names loopback or one
// of h.allowedHosts, whatever its port.
func (h *handler) servesHost(hostport string) bool {
	name := hostName(hostport)
	if ip, err := netip.ParseAddr(name); err == nil && ip.IsLoopback() {
		return true
	}
	return name == "localhost" || slices.Contains(h.allowedHosts, name)
}

// hostName is the name of a Host header or an allowed host in one form:
// without port, brackets or final dot, lower case, an IP address in its
// canonical text.
func hostName(s string) string {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	s = strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), "."))
	if ip, err := netip.ParseAddr(s); err == nil {
		return ip.String()
	}
	return s
}
