package notify

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/sked-dev/sked/internal/clip"
)

// Limits of the chat and push formats, which refuse longer texts (Slack: a
// section's text is at most 3,000 characters; Discord: an embed's title
// 256, its description 4,096; ntfy turns a message over 4,096 bytes into an
// attachment).
const (
	chatOutputBytes = 1500
	slackTextChars  = 3000
	discordTitle    = 256
	discordDesc     = 4096
)

// subject is how every text names the job: its name when it has one, else
// its id.
func (e Event) subject() string { return cmp.Or(e.JobName, e.JobID) }

// attempts is "1 attempt" or "n attempts".
func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

// who names the job in a sentence: the name first, with its type and id.
func (e Event) who() string {
	if e.JobName != "" {
		return fmt.Sprintf("%s (%s, job %s)", e.JobName, e.JobType, e.JobID)
	}
	return fmt.Sprintf("job %s (%s)", e.JobID, e.JobType)
}

// text writes the title and message of a job event from its fields.
func (e Event) text() (title, message string) {
	lastErr := cmp.Or(e.Error, "none recorded")
	switch e.Kind {
	case KindGaveUp:
		title = fmt.Sprintf("sked: %s gave up after %s", e.subject(), attempts(e.Attempts))
		failed := fmt.Sprintf("all %d attempts failed", e.Attempts)
		if e.Attempts == 1 {
			failed = "its one attempt failed"
		}
		message = fmt.Sprintf("%s gave up on its slot %s: %s. Last error: %s.",
			e.who(), e.Slot.UTC().Format(time.RFC3339), failed, lastErr)
		if e.Schedule != "" {
			message += fmt.Sprintf(" The schedule %q goes on at its next slot.", e.Schedule)
		} else {
			message += fmt.Sprintf(" The job is dead; `sked retry %s` runs it again.", e.JobID)
		}
	case KindDead:
		title = fmt.Sprintf("sked: %s is dead", e.subject())
		message = fmt.Sprintf("%s failed %d of %d attempts and is dead. Last error: %s. `sked retry %s` runs it again.",
			e.who(), e.Attempts, e.MaxAttempts, lastErr, e.JobID)
	case KindQuiet:
		title = fmt.Sprintf("sked: %s has gone quiet", e.subject())
		message = fmt.Sprintf("No run of %s on schedule %q has succeeded within %s. Last error: %s.",
			e.who(), e.Schedule, time.Duration(e.ExpectSuccessWithin), lastErr)
	case KindRecovered:
		title = fmt.Sprintf("sked: %s succeeds again", e.subject())
		message = fmt.Sprintf("A run of %s succeeded at %s.", e.who(), e.At.UTC().Format(time.RFC3339))
	default:
		title = fmt.Sprintf("sked: %s", e.Kind)
		message = title
	}
	return title, message
}

// good reports whether the event is good news, which the formats show in
// a calmer way.
func (e Event) good() bool { return e.Kind == KindRecovered }

// plain is the event as plain text: the message, the tail of the output
// (at most max bytes of it) and the link.
func (e Event) plain(max int) string {
	var b strings.Builder
	b.WriteString(e.Message)
	if out := tail(e.Output, max); out != "" {
		b.WriteString("\n\nOutput (tail):\n")
		b.WriteString(out)
	}
	if e.URL != "" {
		b.WriteString("\n\n")
		b.WriteString(e.URL)
	}
	return b.String()
}

// httpPayload is the payload of a `notify.http` job, as of an `http` job
// (see worker.HTTPPayload).
type httpPayload struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    any               `json:"body,omitempty"`
}

// emailPayload is the payload of a `notify.email` job, as of an `email`
// job (see worker.EmailPayload).
type emailPayload struct {
	Sink    string `json:"sink"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

// delivery is the type and payload of the job that delivers e to s.
func (s Sink) delivery(e Event) (typ string, payload any) {
	switch s.Kind {
	case SinkSMTP:
		return TypeEmail, emailPayload{Sink: s.SMTP.Name, Subject: e.Title, Body: e.plain(len(e.Output))}
	case SinkNtfy:
		body := map[string]any{"topic": s.Topic, "title": e.Title, "message": e.plain(chatOutputBytes),
			"tags": []string{"sked", e.Kind}, "priority": 4}
		if e.good() {
			body["priority"] = 3
		}
		if e.URL != "" {
			body["click"] = e.URL
		}
		return TypeHTTP, httpPayload{URL: s.URL, Method: "POST", Body: body}
	case SinkGotify:
		body := map[string]any{"title": e.Title, "message": e.plain(chatOutputBytes), "priority": 7}
		if e.good() {
			body["priority"] = 4
		}
		if e.URL != "" {
			body["extras"] = map[string]any{"client::notification": map[string]any{"click": map[string]string{"url": e.URL}}}
		}
		return TypeHTTP, httpPayload{URL: s.URL, Method: "POST", Headers: map[string]string{"X-Gotify-Key": s.Token}, Body: body}
	case SinkSlack:
		return TypeHTTP, httpPayload{URL: s.URL, Method: "POST", Body: slackMessage(e)}
	case SinkDiscord:
		return TypeHTTP, httpPayload{URL: s.URL, Method: "POST", Body: discordMessage(e)}
	default:
		return TypeHTTP, httpPayload{URL: s.URL, Method: "POST", Body: e}
	}
}

// slackMessage is e as a Slack incoming-webhook message: blocks for Slack,
// and the same content as mrkdwn in text, which Slack shows in the
// notification and Slack-compatible servers (Mattermost) show instead of
// the blocks.
func slackMessage(e Event) map[string]any {
	title, message := "*"+slackEscape(e.Title)+"*", slackEscape(e.Message)
	output := ""
	if out := tail(e.Output, chatOutputBytes); out != "" {
		output = "```" + slackEscape(unfence(out)) + "```"
	}
	link := ""
	if e.URL != "" {
		link = "<" + e.URL + "|Open " + slackEscape(e.subject()) + " in sked>"
	}
	section := func(text string) map[string]any {
		return map[string]any{"type": "section", "text": map[string]string{"type": "mrkdwn", "text": clip.Runes(text, slackTextChars)}}
	}
	blocks := []any{section(title + "\n" + message)}
	if output != "" {
		blocks = append(blocks, section(output))
	}
	if link != "" {
		blocks = append(blocks, section(link))
	}
	text := strings.Join(nonEmpty(title, message, output, link), "\n")
	return map[string]any{"text": text, "blocks": blocks}
}

// discordMessage is e as a Discord webhook message: one embed whose title
// links to the job, and no mentions, whatever the output says.
func discordMessage(e Event) map[string]any {
	desc := e.Message
	if out := tail(e.Output, chatOutputBytes); out != "" {
		desc += "\n```\n" + unfence(out) + "\n```"
	}
	color := 0xD73A49
	if e.good() {
		color = 0x2DA44E
	}
	embed := map[string]any{
		"title": clip.Runes(e.Title, discordTitle), "description": clip.Runes(desc, discordDesc),
		"color": color, "timestamp": e.At.UTC().Format(time.RFC3339), "footer": map[string]string{"text": "sked · " + e.Kind},
	}
	if e.URL != "" {
		embed["url"] = e.URL
	}
	return map[string]any{"username": "sked", "embeds": []any{embed}, "allowed_mentions": map[string]any{"parse": []string{}}}
}

// slackEscape escapes the three characters Slack's mrkdwn reserves, so
// that a job's output cannot mention @channel or forge a link.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// unfence breaks up ``` inside a code block, which would end it.
func unfence(s string) string { return strings.ReplaceAll(s, "```", "`\u200b``") }

// tail returns the last max bytes of s, starting at a whole character,
// after an ellipsis when it was cut.
func tail(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return "…" + clip.Tail(s, max)
}

// nonEmpty returns the strings of ss that are not empty.
func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
