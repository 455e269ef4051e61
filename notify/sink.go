package notify

import (
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"path"
	"strings"
)

// Sink kinds.
const (
	SinkWebhook = "webhook" // POST the event as JSON (signed like every http job)
	SinkNtfy    = "ntfy"    // publish to an ntfy topic
	SinkGotify  = "gotify"  // push a Gotify message
	SinkSlack   = "slack"   // a Slack (or Mattermost) incoming webhook
	SinkDiscord = "discord" // a Discord webhook
	SinkSMTP    = "smtp"    // email through an SMTP server, as an `email` job
)

// Sink is where notifications go.
type Sink struct {
	Kind  string
	URL   string // webhook, slack, discord: the URL; ntfy: the server root; gotify: its message endpoint
	Topic string // ntfy
	Token string // gotify application token
	SMTP  *SMTP  // smtp; nil for the other kinds
}

// SMTP is an email sink: the server, the account sked signs in with and
// the envelope of every message. Its password never leaves the process:
// the `email` jobs that carry its messages name the sink by Name, and the
// handler of kind email looks the rest up here.
type SMTP struct {
	// Name is the sink as given to --notify with its password masked
	// ("smtp://alerts:xxxxx@mail.example.com:587?to=ops@example.com").
	Name string
	Host string
	Port string
	// ImplicitTLS is set for smtps:// and port 465: TLS from the first
	// byte. Otherwise the connection is upgraded with STARTTLS when the
	// server offers it, and must be before a password is sent.
	ImplicitTLS bool
	Username    string // empty: send without AUTH
	Password    string
	From        string   // envelope sender and From header
	To          []string // recipients; at least one
}

// ParseSink reads a sink from its flag form:
//
//	webhook:https://example.com/hooks/sked
//	ntfy:https://ntfy.sh/my-topic
//	gotify:https://gotify.example.com/?token=AbC…
//	slack:https://hooks.slack.com/services/T…/B…/…
//	discord:https://discord.com/api/webhooks/123…/AbC…
//	smtp://user:password@mail.example.com:587?from=sked@example.com&to=ops@example.com
//	smtps://user:password@mail.example.com?to=a@example.com&to=b@example.com
func ParseSink(s string) (Sink, error) {
	if strings.HasPrefix(s, "smtp://") || strings.HasPrefix(s, "smtps://") {
		return parseSMTP(s)
	}
	kind, rawURL, ok := strings.Cut(s, ":")
	if !ok {
		return Sink{}, errors.New("notify sink without a kind: write it as kind:URL, e.g. webhook:https://example.com/hook, ntfy:https://ntfy.sh/topic, slack:https://hooks.slack.com/services/…, or as smtp://user:password@host:587?to=you@example.com")
	}
	switch kind {
	case SinkWebhook, SinkNtfy, SinkGotify, SinkSlack, SinkDiscord:
	case "http", "https":
		return Sink{}, fmt.Errorf("notify sink %q is a URL without a kind: write it as webhook:%s for the events as JSON, "+
			"or with ntfy:, gotify:, slack: or discord: for those services", urlLabel(s), urlLabel(s))
	case SinkSMTP, "smtps":
		return Sink{}, errors.New("notify sink smtp:…: write an email sink as a URL, smtp://user:password@host:587?to=you@example.com")
	default:
		return Sink{}, fmt.Errorf("notify sink %s: unknown kind %q; use webhook, ntfy, gotify, slack, discord or an smtp:// URL", sinkLabel(kind, rawURL), kind)
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Sink{}, fmt.Errorf("notify sink %s: not an absolute http(s) URL", sinkLabel(kind, rawURL))
	}
	switch kind {
	case SinkNtfy:
		// The topic is the path's last part; what is before it is where
		// the server is served (a proxy's prefix, /ntfy/ say).
		prefix, topic := path.Split(strings.Trim(u.Path, "/"))
		if topic == "" {
			return Sink{}, fmt.Errorf("notify sink %s: give the topic as the URL's path, e.g. ntfy:https://ntfy.sh/my-topic", sinkLabel(kind, rawURL))
		}
		return Sink{Kind: kind, URL: u.Scheme + "://" + u.Host + "/" + prefix, Topic: topic}, nil
	case SinkGotify:
		token := u.Query().Get("token")
		if token == "" {
			return Sink{}, fmt.Errorf("notify sink %s: give the application token as ?token=…", sinkLabel(kind, rawURL))
		}
		return Sink{Kind: kind, URL: u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/") + "/message", Token: token}, nil
	case SinkSlack, SinkDiscord:
		if strings.Trim(u.Path, "/") == "" {
			return Sink{}, fmt.Errorf("notify sink %s: give the whole webhook URL the %s settings show, path included", sinkLabel(kind, rawURL), kind)
		}
	}
	return Sink{Kind: kind, URL: u.String()}, nil
}

// sinkLabel names a sink in an error without what may be its secret (a
// webhook's path, a token in the query): its kind and its URL's scheme and
// host, "…" for the rest.
func sinkLabel(kind, rawURL string) string {
	return fmt.Sprintf("%q", kind+":"+urlLabel(rawURL))
}

// urlLabel is rawURL's scheme and host, with "/…" for a path, query or
// fragment, which may hold a secret; "…" for what is not such a URL.
func urlLabel(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "…"
	}
	label := u.Scheme + "://" + u.Host
	if strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
		label += "/…"
	}
	return label
}

// parseSMTP reads smtp://user:password@host:port?from=…&to=…&to=… (or
// smtps://…) into a sink.
func parseSMTP(s string) (Sink, error) {
	u, err := url.Parse(s)
	if err != nil { // its message would repeat the password
		return Sink{}, errors.New("notify sink smtp://…: not a URL; percent-encode the characters @ : / ? # in the user name and password, e.g. smtp://me%40example.com:p%3Fss@mail.example.com:587?to=you@example.com")
	}
	bad := func(format string, args ...any) (Sink, error) {
		return Sink{}, fmt.Errorf("notify sink %q: "+format, append([]any{u.Redacted()}, args...)...)
	}
	if u.Hostname() == "" {
		return bad("name the SMTP server, e.g. smtp://user:password@mail.example.com:587?to=you@example.com")
	}
	if strings.Trim(u.Path, "/") != "" || u.Fragment != "" {
		return bad("an SMTP sink has no path; give the recipients as ?to=you@example.com")
	}
	m := SMTP{Name: u.Redacted(), Host: u.Hostname(), Port: u.Port(), ImplicitTLS: u.Scheme == "smtps"}
	if m.Port == "" {
		m.Port = "587"
		if m.ImplicitTLS {
			m.Port = "465"
		}
	}
	if m.Port == "465" {
		m.ImplicitTLS = true
	}
	if u.User != nil {
		m.Username = u.User.Username()
		m.Password, _ = u.User.Password()
		if m.Username == "" {
			return bad("the user name is empty; write smtp://user:password@host, or leave both out to send without signing in")
		}
	}
	q := u.Query()
	for k := range q {
		if k != "to" && k != "from" {
			return bad("unknown parameter %q; an SMTP sink takes to= (repeatable) and from=", k)
		}
	}
	if len(q["to"]) == 0 {
		return bad("give at least one recipient as ?to=you@example.com (repeat to= for more)")
	}
	for _, to := range q["to"] {
		a, err := mail.ParseAddress(to)
		if err != nil {
			return bad("recipient %q is not an email address", to)
		}
		m.To = append(m.To, a.Address)
	}
	from := q.Get("from")
	if from == "" {
		if !strings.Contains(m.Username, "@") {
			return bad("give the sender as from=sked@example.com (it defaults to the user name only when that is an address)")
		}
		from = m.Username
	}
	a, err := mail.ParseAddress(from)
	if err != nil {
		return bad("sender %q is not an email address", from)
	}
	m.From = a.Address
	return Sink{Kind: SinkSMTP, SMTP: &m}, nil
}
