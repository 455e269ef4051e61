package handlers

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sked-dev/sked/db"
	"github.com/sked-dev/sked/schedule"
)

// Limits on the fields of a new job.
const (
	maxTypeLen           = 100
	maxIdempotencyKeyLen = 255
	// maxOneOffJitter bounds the jitter of a one-off job. Jitter spreads
	// jobs created for the same instant over a window; a longer wait is a
	// later runAt. A recurring job's jitter is bounded by its schedule
	// instead (see checkJitter).
	maxOneOffJitter = 24 * time.Hour
	// gapSlots is how many of a schedule's coming slots jobCheck.gaps
	// looks at for the shortest and longest time between two, besides
	// those around each change of the zone's offset in the coming year
	// (schedule.Schedule.Gaps).
	gapSlots = 500
	// gapHorizon is how far ahead jobCheck.gaps walks the slots at least:
	// a week and a day, so that a weekly pattern's gaps (the weekend of a
	// weekday schedule) show whatever the day it is checked.
	gapHorizon = 8 * 24 * time.Hour
)

// jobCreateRequest is the body of POST /jobs and PUT /jobs/by-name/{name}
// as the server reads it (wire.JobCreateRequest encodes it). Pointers and
// raw fields tell an absent field from a zero one; durations and runAt are
// parsed by hand so that their errors name the field. Encoded, absent
// fields are left out.
type jobCreateRequest struct {
	Name           string          `json:"name,omitempty"`
	Type           string          `json:"type,omitempty"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	RunAt          *string         `json:"runAt,omitempty"`
	RunIn          json.RawMessage `json:"runIn,omitempty"`
	Schedule       string          `json:"schedule,omitempty"`
	Timezone       string          `json:"timezone,omitempty"`
	MaxAttempts    *int            `json:"maxAttempts,omitempty"`
	Timeout        json.RawMessage `json:"timeout,omitempty"`
	Backoff        json.RawMessage `json:"backoff,omitempty"`
	Jitter         json.RawMessage `json:"jitter,omitempty"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty"`
	Overlap        string          `json:"overlap,omitempty"`
	Misfire        string          `json:"misfire,omitempty"`
	// ExpectSuccessWithin arms a recurring job's dead-man's switch.
	ExpectSuccessWithin json.RawMessage `json:"expectSuccessWithin,omitempty"`
	// Notify is the job's own notification settings, a db.Notify.
	Notify json.RawMessage `json:"notify,omitempty"`
}

// typeDisabledError refuses a job of a type in Config.DisabledTypes. It
// unwraps to its *db.ValidationError.
type typeDisabledError struct{ db.ValidationError }

func (e *typeDisabledError) Unwrap() error { return &e.ValidationError }

// jobParams validates req as jobCreateParams does, at the store's now, then
// refuses disabled types (a *typeDisabledError, with the params read so
// far) and checks the notification settings and the payload of its kind,
// as this server has them. Every error is or wraps a *db.ValidationError.
func (h *handler) jobParams(req *jobCreateRequest, headerKeys []string) (db.JobCreateParams, error) {
	p, err := jobCreateParams(req, headerKeys, h.store.Now())
	if err != nil {
		return p, err
	}
	if reason, ok := h.disabledTypes[p.Type]; ok {
		return p, &typeDisabledError{db.ValidationError{Field: "type", Msg: reason}}
	}
	if h.checkNotify != nil {
		if err := h.checkNotify(p.Notify); err != nil {
			var ve *db.ValidationError
			if !errors.As(err, &ve) {
				err = &db.ValidationError{Field: "notify", Msg: err.Error()}
			}
			return p, err
		}
	}
	if h.validatePayload != nil {
		if err := h.validatePayload(p.Type, p.Payload); err != nil {
			var ve *db.ValidationError
			if !errors.As(err, &ve) {
				err = &db.ValidationError{Field: "payload", Msg: err.Error()}
			}
			return p, err
		}
	}
	return p, nil
}

// jobCreateParams validates req (and the Idempotency-Key header values) for
// a job created at now. What it leaves out stays zero: the store fills in
// the defaults, by the job's type. The checks run in the order listed; the
// first fault found is the error, a *db.ValidationError.
func jobCreateParams(req *jobCreateRequest, headerKeys []string, now time.Time) (db.JobCreateParams, error) {
	c := &jobCheck{req: req, headerKeys: headerKeys, now: now, p: db.JobCreateParams{
		Name:     req.Name,
		Type:     req.Type,
		Schedule: req.Schedule,
		Timezone: req.Timezone,
	}}
	for _, check := range []func() error{
		c.checkType, c.checkName, c.checkPayload, c.checkTimezone, c.checkRunAt, c.checkSchedule,
		c.checkOverlap, c.checkMisfire, c.checkMaxAttempts, c.checkTimeout, c.checkBackoff,
		c.checkJitter, c.checkExpectSuccessWithin, c.checkIdempotencyKey, c.checkNotify,
	} {
		if err := check(); err != nil {
			return db.JobCreateParams{}, err
		}
	}
	return c.p, nil
}

// jobCheck is a create request being validated: each check method looks at
// one field (or two that depend on each other) of req and sets it in p.
type jobCheck struct {
	req        *jobCreateRequest
	headerKeys []string           // values of the Idempotency-Key header
	now        time.Time          // when the job is created
	sched      *schedule.Schedule // req.Schedule parsed by checkSchedule; nil for a one-off job
	p          db.JobCreateParams

	// shortest and longest are sched's gaps once gapsDone (see gaps).
	shortest, longest schedule.Gap
	gapsDone          bool
}

// gaps returns the shortest and the longest time between two consecutive
// slots of the schedule, the bounds of its jitter and of its dead-man's
// switch: among its next gapSlots slots, those within gapHorizon, and those
// around each change of its zone's offset in the coming year, so that the
// answer does not depend on the day of the year it is asked. It is
// computed once per request.
func (c *jobCheck) gaps() (shortest, longest schedule.Gap) {
	if !c.gapsDone {
		c.shortest, c.longest = c.sched.Gaps(c.now, gapSlots, c.now.Add(gapHorizon))
		c.gapsDone = true
	}
	return c.shortest, c.longest
}

// fieldError is the *db.ValidationError of field.
func fieldError(field, format string, args ...any) error {
	return &db.ValidationError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// timeField parses v, the RFC 3339 time of field, or refuses it naming the
// field.
func timeField(field, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fieldError(field, "%s %q is not an RFC 3339 time such as \"2026-12-01T09:00:00Z\"", field, v)
	}
	return t, db.CheckTime(field, t)
}

func (c *jobCheck) checkType() error {
	switch t := c.req.Type; {
	case t == "":
		return fieldError("type", "type is required: the kind of work, such as \"http\", \"exec\" or a handler's name")
	case len(t) > maxTypeLen:
		return fieldError("type", "type is %d characters long; at most %d are allowed", len(t), maxTypeLen)
	case !IsJobType(t):
		return fieldError("type", "type %q may contain only letters, digits and _ . : -", t)
	}
	return nil
}

func (c *jobCheck) checkName() error {
	if c.req.Name == "" {
		return nil
	}
	return db.CheckName(c.req.Name)
}

func (c *jobCheck) checkPayload() error {
	payload, err := normalizePayload(c.req.Payload)
	if err != nil {
		return fieldError("payload", "payload is not valid JSON: %v", err)
	}
	// A body is UTF-8 (decodeJSON); a payload given in process may not be.
	if err := db.CheckText("payload", string(payload)); err != nil {
		return err
	}
	c.p.Payload = payload
	return nil
}

func (c *jobCheck) checkTimezone() error {
	tz := c.req.Timezone
	if tz == "" {
		return nil
	}
	if _, err := schedule.LoadLocation(tz); err != nil {
		return fieldError("timezone", "timezone %v", err)
	}
	return nil
}

// checkRunAt sets a one-off job's due time: runAt, or runIn from the
// store's now (so that a client's clock does not count).
func (c *jobCheck) checkRunAt() error {
	if !isAbsent(c.req.RunIn) {
		if err := c.checkRunIn(); err != nil {
			return err
		}
	}
	if c.req.RunAt == nil {
		return nil
	}
	if c.req.Schedule != "" {
		return fieldError("runAt", "runAt and schedule cannot be used together: give runAt for a one-off job or schedule for a recurring one")
	}
	if !isAbsent(c.req.RunIn) {
		return fieldError("runIn", "runIn and runAt cannot be used together: give the time (runAt) or how long from now (runIn)")
	}
	t, err := timeField("runAt", *c.req.RunAt)
	if err != nil {
		return err
	}
	c.p.RunAt = t
	return nil
}

func (c *jobCheck) checkRunIn() error {
	if c.req.Schedule != "" {
		return fieldError("runIn", "runIn and schedule cannot be used together: give runIn for a one-off job or schedule for a recurring one")
	}
	var in time.Duration
	if err := setDuration(&in, "runIn", c.req.RunIn, 0); err != nil {
		return err
	}
	c.p.RunAt = c.now.Add(in) // at most 292 years: within db.LatestTime
	return nil
}

// checkSchedule parses a recurring job's schedule and sets its defaults:
// timezone UTC, overlap skip, misfire run_once.
func (c *jobCheck) checkSchedule() error {
	if c.req.Schedule == "" {
		return nil
	}
	sched, err := schedule.Parse(c.req.Schedule, c.req.Timezone)
	if err != nil {
		return fieldError("schedule", "schedule: %v", err)
	}
	c.sched = sched
	c.p.Timezone = cmp.Or(c.p.Timezone, "UTC")
	c.p.Overlap, c.p.Misfire = db.OverlapSkip, db.MisfireRunOnce
	return nil
}

func (c *jobCheck) checkOverlap() error {
	return c.checkPolicy("overlap", c.req.Overlap, &c.p.Overlap, db.OverlapSkip, db.OverlapQueueOne)
}

func (c *jobCheck) checkMisfire() error {
	return c.checkPolicy("misfire", c.req.Misfire, &c.p.Misfire, db.MisfireRunOnce, db.MisfireSkip, db.MisfireRunAll)
}

// checkPolicy checks v, the value of a recurring job's policy field: absent,
// or one of allowed (the first is the default), which it sets in *dst.
func (c *jobCheck) checkPolicy(field, v string, dst *string, allowed ...string) error {
	switch {
	case v == "":
		return nil
	case c.req.Schedule == "":
		return fieldError(field, "%s applies only to recurring jobs; remove it or add a schedule", field)
	case !slices.Contains(allowed, v):
		quoted := make([]string, len(allowed))
		for i, a := range allowed {
			quoted[i] = strconv.Quote(a)
		}
		quoted[0] += " (the default)"
		last := len(quoted) - 1
		return fieldError(field, "%s %q is not a policy; use %s or %s", field, v, strings.Join(quoted[:last], ", "), quoted[last])
	}
	*dst = v
	return nil
}

func (c *jobCheck) checkMaxAttempts() error {
	if c.req.MaxAttempts == nil {
		return nil
	}
	switch n := *c.req.MaxAttempts; {
	case n < 1:
		return fieldError("maxAttempts", "maxAttempts must be at least 1, not %d; omit it for the default of the job's type", n)
	case n > db.MaxAttempts:
		return fieldError("maxAttempts", "maxAttempts must be at most %d, not %d: with waits capped at %s, %d attempts already retry for weeks; for work that must go on, use a schedule", db.MaxAttempts, n, db.MaxBackoff, db.MaxAttempts)
	}
	c.p.MaxAttempts = *c.req.MaxAttempts
	return nil
}

func (c *jobCheck) checkTimeout() error {
	return setDuration(&c.p.Timeout, "timeout", c.req.Timeout, db.DefaultTimeout)
}

func (c *jobCheck) checkBackoff() error {
	return setDuration(&c.p.Backoff, "backoff", c.req.Backoff, db.DefaultBackoff)
}

// checkJitter parses jitter and bounds it. A job is due at its slot plus a
// fixed offset below its jitter, so a recurring job's jitter is at most the
// shortest time between two of its slots (see gaps): then every run is due
// before the next slot. A one-off job's is at most maxOneOffJitter.
func (c *jobCheck) checkJitter() error {
	if err := setDuration(&c.p.Jitter, "jitter", c.req.Jitter, 0); err != nil || c.p.Jitter == 0 {
		return err
	}
	jitter := c.p.Jitter
	if c.sched == nil {
		if jitter > maxOneOffJitter {
			return fieldError("jitter", "jitter %s is longer than %s, the most a one-off job allows; to run it later, set runAt", jitter, maxOneOffJitter)
		}
		return nil
	}
	shortest, _ := c.gaps()
	if gap, from := shortest.Length, shortest.From; gap > 0 && jitter > gap {
		loc := c.sched.Location()
		return fieldError("jitter", "jitter %s is longer than %s, the shortest time between two slots of schedule %q (%s to %s); "+
			"give at most %s, so that each run is due before the next slot",
			jitter, gap, c.req.Schedule, from.In(loc).Format(time.RFC3339), from.Add(gap).In(loc).Format(time.RFC3339), gap)
	}
	return nil
}

// checkExpectSuccessWithin parses the dead-man's switch and bounds it: it
// watches a schedule, and must be longer than the longest time between two
// of its slots (see gaps), or the schedule would be quiet in that gap every
// time however its runs went.
func (c *jobCheck) checkExpectSuccessWithin() error {
	if err := setDuration(&c.p.ExpectSuccessWithin, "expectSuccessWithin", c.req.ExpectSuccessWithin, 0); err != nil {
		return err
	}
	within := c.p.ExpectSuccessWithin
	if within > 0 && c.req.Schedule == "" {
		return fieldError("expectSuccessWithin", "expectSuccessWithin watches a schedule; remove it or add a schedule")
	}
	if within == 0 || c.sched == nil {
		return nil
	}
	_, longest := c.gaps()
	if gap := longest.Length; gap > 0 && time.Duration(within) <= gap {
		loc := c.sched.Location()
		return fieldError("expectSuccessWithin", "expectSuccessWithin %s is no longer than %s, the longest time between two slots of schedule %q (%s to %s): "+
			"the schedule would be reported quiet in that gap however its runs went; give more than %s plus the time a run takes",
			within, gap, c.req.Schedule, longest.From.In(loc).Format(time.RFC3339), longest.From.Add(gap).In(loc).Format(time.RFC3339), gap)
	}
	return nil
}

func (c *jobCheck) checkIdempotencyKey() error {
	key, err := idempotencyKey(c.req.IdempotencyKey, c.headerKeys)
	if err != nil {
		return err
	}
	c.p.IdempotencyKey = key
	return nil
}

// checkNotify reads the notification settings, nil when they say nothing
// (the server's apply). Which events and sinks are known is the server's to
// check (Config.CheckNotifyFunc).
func (c *jobCheck) checkNotify() error {
	if isAbsent(c.req.Notify) {
		return nil
	}
	var n db.Notify
	if err := decodeJSON(bytes.NewReader(c.req.Notify), &n); err != nil {
		var ve *db.ValidationError
		if errors.As(err, &ve) {
			return fieldError("notify."+ve.Field, "notify: %s", ve.Msg)
		}
		// Not an object: the raw value starts with what it is.
		kind := map[byte]string{'[': "array", '"': "string", 't': "bool", 'f': "bool"}[c.req.Notify[0]]
		return fieldError("notify", "notify must be an object such as {\"on\": [\"gave_up\"], \"sinks\": [\"ntfy:https://ntfy.sh/topic\"]}, not %s",
			jsonKind(cmp.Or(kind, "number")))
	}
	if n.On != nil && len(n.On) == 0 {
		return fieldError("notify.on", `notify.on is empty: leave it out for the default events, or give ["none"] to tell none`)
	}
	if len(n.On) > 0 || len(n.Sinks) > 0 || n.Ping != "" {
		c.p.Notify = &n
	}
	return nil
}

// setDuration parses the duration field raw into *dst; an absent (or null)
// field leaves *dst as it is. A field with a default (def > 0) must be
// greater than zero; any other must not be negative.
func setDuration(dst *time.Duration, field string, raw json.RawMessage, def time.Duration) error {
	if isAbsent(raw) {
		return nil
	}
	var v db.Duration
	if err := v.UnmarshalJSON(raw); err != nil {
		return fieldError(field, "%s: %v", field, err)
	}
	switch d := time.Duration(v); {
	case d < 0:
		return fieldError(field, "%s must not be negative, not %s", field, d)
	case d == 0 && def > 0:
		return fieldError(field, "%s must be greater than zero; omit it for the default of %s", field, def)
	case d < time.Millisecond && def > 0:
		// Stored in whole milliseconds, it would be zero: every attempt
		// timed out at once, every retry without a wait.
		return fieldError(field, "%s %s is shorter than 1ms, the precision sked keeps; give at least 1ms", field, d)
	}
	*dst = time.Duration(v)
	return nil
}

// IsJobType reports whether t may be a job's type: 1 to 100 letters,
// digits and _ . : - (maxTypeLen).
func IsJobType(t string) bool {
	return t != "" && len(t) <= maxTypeLen && strings.IndexFunc(t, func(c rune) bool { return !isTypeChar(c) }) < 0
}

// isTypeChar reports whether c may appear in a job type.
func isTypeChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '.' || c == ':' || c == '-'
}

// isAbsent reports whether a raw field was left out or given as null.
func isAbsent(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// normalizePayload returns raw compacted, or {} when it is absent or null.
func normalizePayload(raw json.RawMessage) (json.RawMessage, error) {
	if isAbsent(raw) {
		return json.RawMessage(`{}`), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// idempotencyKey merges the body's key with the Idempotency-Key header's. The
// header may be a structured-field string ("…", as the IETF draft has it) or
// bare. Both may be given only when they agree. The key is UTF-8 text without
// control characters: it reaches handlers as an HTTP header and an
// environment variable, where CR, LF and NUL cannot go.
func idempotencyKey(body string, header []string) (string, error) {
	invalid := func(format string, args ...any) (string, error) {
		return "", fieldError("idempotencyKey", format, args...)
	}
	if len(header) > 1 {
		return invalid("the Idempotency-Key header is given %d times; give one idempotency key", len(header))
	}
	key := body
	if len(header) == 1 {
		h := strings.TrimSpace(header[0])
		if uq, err := strconv.Unquote(h); err == nil && strings.HasPrefix(h, `"`) {
			h = uq
		}
		if h == "" {
			return invalid("the Idempotency-Key header is empty; give a key or leave the header out")
		}
		if body != "" && body != h {
			return invalid("idempotencyKey %q in the body and the Idempotency-Key header %q differ; give one key", body, h)
		}
		key = h
	}
	if db.ReservedKey(key) {
		return invalid("idempotencyKey %q begins as the keys of the jobs sked creates itself (%s, %s, %s); pick a key that does not",
			key, db.BackfillKeyPrefix, db.NotifyKeyPrefix, db.PingKeyPrefix)
	}
	if len(key) > maxIdempotencyKeyLen {
		return invalid("idempotencyKey is %d bytes long; at most %d are allowed", len(key), maxIdempotencyKeyLen)
	}
	if !utf8.ValidString(key) {
		return invalid("idempotencyKey %q is not valid UTF-8; send the key as UTF-8 text", key)
	}
	if i := strings.IndexFunc(key, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(key[i:])
		return invalid("idempotencyKey %q contains a control character (%U at byte %d); use printable characters only", key, r, i)
	}
	return key, nil
}
