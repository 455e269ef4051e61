package worker

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"

	"github.com/sked-dev/sked/db"
)

// nonPublic lists the ranges, beyond what netip.Addr's predicates cover, that
// are not reachable on the public internet: "this network", carrier-grade
// NAT, IETF protocol assignments, documentation, benchmarking and reserved
// space (which holds the limited broadcast address), and their IPv6
// counterparts. IPv4-compatible IPv6 (::/96) is deprecated and never routed.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("fec0::/10"),
}

// Prefixes of IPv6 addresses that carry an IPv4 address a gateway forwards
// to: NAT64 (RFC 6052) in the last four bytes, 6to4 (RFC 3056) in bytes 2-5.
var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// PublicAddr reports whether ip may be a target when private targets are
// refused. It is false for invalid addresses, loopback, private (10/8,
// 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16, fe80::/10),
// unspecified, multicast, carrier-grade NAT (100.64/10), 0.0.0.0/8, broadcast
// and the other reserved and documentation ranges; for IPv4-mapped IPv6
// addresses (::ffff:a.b.c.d) and for NAT64 and 6to4 addresses it judges the
// IPv4 address inside. It is true otherwise.
func PublicAddr(ip netip.Addr) bool {
	if !ip.IsValid() {
		return false
	}
	ip = ip.Unmap().WithZone("")
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() ||
		ip.IsMulticast() || ip.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	switch b := ip.As16(); {
	case nat64Prefix.Contains(ip):
		return PublicAddr(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(ip):
		return PublicAddr(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return true
}

// PrivateTargetError is the refusal of a connection to an address that
// PublicAddr rejects, made when sked serve runs without
// --allow-private-targets. The http kind reports it as a permanent failure.
type PrivateTargetError struct {
	Addr netip.Addr // the refused address
}

func (e *PrivateTargetError) Error() string {
	return fmt.Sprintf("target %s is loopback/private; start sked serve with --allow-private-targets to allow it", e.Addr)
}

// guardControl is a net.Dialer Control function that refuses to connect to
// non-public addresses. It runs after name resolution, once per address
// actually dialled, so a name that resolves (or re-resolves, as in DNS
// rebinding) to a private address is refused too, and so is every redirect
// hop.
func guardControl(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		host, _, splitErr := net.SplitHostPort(address)
		if splitErr != nil {
			return fmt.Errorf("guard %s address %q: %w", network, address, splitErr)
		}
		ip, parseErr := netip.ParseAddr(host)
		if parseErr != nil {
			return fmt.Errorf("guard %s address %q: %w", network, address, parseErr)
		}
		ap = netip.AddrPortFrom(ip, 0)
	}
	if !PublicAddr(ap.Addr()) {
		return &PrivateTargetError{Addr: ap.Addr().Unmap()}
	}
	return nil
}

// Origins is a set of URL origins: scheme, host and port (the scheme's
// default when the URL gives none).
type Origins map[string]bool

// NewOrigins is the set of the origins of urls; those that do not parse are
// left out.
func NewOrigins(urls ...string) Origins {
	o := Origins{}
	for _, raw := range urls {
		if u, err := url.Parse(raw); err == nil && u.Host != "" {
			o[origin(u)] = true
		}
	}
	return o
}

// Has reports whether u's origin is in o.
func (o Origins) Has(u *url.URL) bool { return len(o) > 0 && o[origin(u)] }

// origin is u's scheme, host and port, the port written out.
func origin(u *url.URL) string {
	host, port := strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(host, port)
}

// RefusePrivateTarget refuses an http payload whose URL names a loopback or
// private address outright (an IP address, or localhost), unless its origin
// is trusted: the http kind of a sked serve without --allow-private-targets
// would refuse to call it, and the job would go dead at its first attempt.
// It is for creating jobs; a host name is judged only when the job runs, on
// the addresses it resolves to then. payload has passed ValidatePayload.
func RefusePrivateTarget(payload json.RawMessage, trusted Origins) error {
	var p HTTPPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return fmt.Errorf("read http payload: %w", err)
	}
	return RefusePrivateURL("payload.url", p.URL, trusted)
}

// RefusePrivateURL is RefusePrivateTarget for a URL that sked calls through
// the http kind (a job's own notification sink or ping URL), field naming
// where it was given.
func RefusePrivateURL(field, rawURL string, trusted Origins) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("read %s: %w", field, err)
	}
	if trusted.Has(u) {
		return nil
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	ip, err := netip.ParseAddr(host)
	if err != nil {
		ip, _ = numericIPv4(host)
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") || ip.IsValid() && !PublicAddr(ip) {
		return &db.ValidationError{Field: field, Msg: fmt.Sprintf("%s is a loopback or private address, which this server may not call "+
			"(every call would fail); start sked serve with --allow-private-targets to allow it", u.Hostname())}
	}
	return nil
}

// numericIPv4 reads host as browsers and C resolvers read an IPv4 address
// in the URL standard's forms: one to four dot-separated numbers, each
// decimal, octal (a leading 0) or hexadecimal (0x), the last filling the
// bytes left, as in 127.1, 0x7f.0.0.1, 017700000001 or 2130706433. Go
// takes these for host names, which another resolver on the way may not.
func numericIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, part := range parts {
		n, ok := ipv4Number(part)
		last := i == len(parts)-1
		if !ok || !last && n > 0xff || last && n >= 1<<(8*(4-i)) {
			return netip.Addr{}, false
		}
		if last {
			v |= n
		} else {
			v |= n << (8 * (3 - i))
		}
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// ipv4Number reads one part of a numeric IPv4 host: decimal, octal after a
// leading 0, hexadecimal after 0x.
func ipv4Number(s string) (uint64, bool) {
	base := 10
	switch {
	case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
		s, base = s[2:], 16
		if s == "" {
			return 0, true
		}
	case len(s) >= 2 && s[0] == '0':
		s, base = s[1:], 8
	}
	n, err := strconv.ParseUint(s, base, 32)
	return n, err == nil
}
