// Package schedule is sked's cron math: it parses schedules, validates
// timezones and computes fire times with sked's stated DST policy. It is pure:
// no I/O and no clock of its own.
//
// # Syntax
//
// A spec is a cron expression of 5 fields (minute hour day-of-month month
// day-of-week), or 6 with a leading seconds field, or a descriptor: @yearly
// (@annually), @monthly, @weekly, @daily (@midnight), @hourly, or "@every D"
// with D a Go duration of at least 1s ("@every 90s", "@every 1h30m"). Field
// syntax and the day-of-month/day-of-week rule are those of
// github.com/robfig/cron/v3. The timezone is a separate IANA name; a TZ= or
// CRON_TZ= prefix in the spec is rejected.
//
// # Time and DST
//
// Cron expressions name wall-clock times in the schedule's timezone. Where
// the wall clock jumps or repeats, sked's policy is:
//
//   - A slot inside a spring-forward gap fires at the first instant after the
//     gap; it is not skipped. "30 2 * * *" in America/New_York fires on
//     2026-03-08 at 03:00 EDT (07:00Z).
//   - A slot inside a fall-back repeat fires once, at its first occurrence.
//     "30 1 * * *" in America/New_York fires on 2026-11-01 at 01:30 EDT
//     (05:30Z) and not again at 01:30 EST; "0 * * * *" fires 00:00 EDT,
//     01:00 EDT, then 02:00 EST.
//   - A wall clock that steps backwards never fires a slot twice.
//   - @every schedules count elapsed time, whole seconds, unaffected by DST.
//
// Every instant returned is in UTC. Computation is done in "naive wall-clock
// space" (the wall clock written as a UTC time), where robfig's own Next is
// free of DST effects, and the result is mapped back to an instant with the
// rules above. robfig's Next in a DST zone skips gap slots, which is why it
// is not used directly.
package schedule

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"
)

// MaxSlotCount caps how many slots of a cron (non-@every) schedule Slots
// counts; a larger count is reported as MaxSlotCount.
const MaxSlotCount = 1_000_000

// maxNextSteps bounds the loop in Next that steps over wall-clock times
// already passed in a fall-back repeat; each step is one naive slot.
const maxNextSteps = 100_000

// maxHorizons bounds how many five-year windows Next searches before it
// reports that no slot exists.
const maxHorizons = 4

// parser accepts 5 fields, an optional leading seconds field and
// descriptors, as documented in the package comment.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// probe is a fixed naive start used by Parse to reject cron specs that never
// fire (e.g. "0 0 30 2 *"): robfig searches five years ahead, which from
// 2000 includes a 29 February, so only impossible dates fail. A fixed time
// keeps Parse independent of the clock.
var probe = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Schedule is a parsed schedule in a timezone. It is immutable and safe for
// concurrent use. Create it with Parse.
type Schedule struct {
	// spec is the cron schedule, nil for @every. Its Location is always UTC:
	// it is evaluated on naive wall-clock times (see the package comment).
	spec *cron.SpecSchedule
	// every is the @every interval in whole seconds, 0 for cron specs.
	every time.Duration
	// loc is the schedule's timezone. Never nil.
	loc *time.Location
}

// Parse parses spec (5 fields, optional leading seconds field, descriptors
// such as @hourly and @every 90s) in the IANA zone tz ("" means UTC). The
// error is written for a person and says how to fix the input. Parse never
// panics. It rejects a TZ= or CRON_TZ= prefix (the zone belongs in tz),
// @every intervals below 1s, and cron specs that can never fire, such as
// "0 0 30 2 *". An @every interval is truncated to whole seconds.
func Parse(spec, tz string) (*Schedule, error) {
	key := tz + "\n" + spec
	if s, ok := parsed.Load(key); ok {
		return s.(*Schedule), nil
	}
	s, err := parse(spec, tz)
	if err == nil && parsedCount.Add(1) <= maxParsed {
		parsed.Store(key, s)
	}
	return s, err
}

// parsed caches the schedules Parse returned, by zone and spec: the stores
// parse a job's schedule at every claim and completion of a recurring job,
// inside the write transaction, and loading a zone reads the tz database
// each time. A Schedule is immutable, so sharing it is safe. The cache stops
// growing at maxParsed entries (schedules checked but never stored, say).
var (
	parsed      sync.Map // string -> *Schedule
	parsedCount atomic.Int64
)

const maxParsed = 4096

func parse(spec, tz string) (s *Schedule, err error) {
	loc, err := LoadLocation(tz)
	if err != nil {
		return nil, err
	}
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, errors.New(`the schedule is empty: give a cron expression such as "0 * * * *", a descriptor such as @hourly, or "@every 90s"`)
	}
	if u := strings.ToUpper(spec); strings.HasPrefix(u, "TZ=") || strings.HasPrefix(u, "CRON_TZ=") {
		return nil, fmt.Errorf(`%q: a TZ= or CRON_TZ= prefix is not accepted; put the zone in the separate "timezone" field (e.g. schedule "0 9 * * *", timezone "Europe/London")`, spec)
	}
	if strings.HasPrefix(spec, "@every") {
		return parseEvery(spec, loc)
	}

	cs, err := parseCron(asRobfigReads(spec))
	if err != nil {
		return nil, fmt.Errorf("%q is not a cron expression: %s", spec, cronMistake(spec, err))
	}
	ss, ok := cs.(*cron.SpecSchedule)
	if !ok {
		// Only @every yields another type, and it is handled above.
		return nil, fmt.Errorf("%q: unsupported schedule type %T", spec, cs)
	}
	// The parser sets the location to time.Local; evaluate in naive space.
	ss.Location = time.UTC
	starDays(spec, ss)
	if ss.Next(probe).IsZero() {
		return nil, fmt.Errorf(`%q never fires: no month it names has that day of the month (e.g. 30 February); check the day-of-month and month fields`, spec)
	}
	return &Schedule{spec: ss, loc: loc}, nil
}

// robfigStar is the bit robfig/cron v3 sets in a field parsed from "*" (its
// unexported starBit): with it in either day field, a day runs when both
// fields name it.
const robfigStar = 1 << 63

// starDays gives ss, parsed from spec, cron's day rule (Vixie cron,
// cronie): when a day-of-month or day-of-week field begins with "*", such
// as "*/2", a day runs when both fields name it; when neither does, a day
// either names runs. robfig takes only a bare "*" (or "?") for a star, so
// "0 8 */2 * 1" would run on odd days and on Mondays, where cron runs on
// Mondays that are odd days.
func starDays(spec string, ss *cron.SpecSchedule) {
	f := strings.Fields(spec)
	if len(f) < 5 || strings.HasPrefix(spec, "@") {
		return
	}
	if dom := f[len(f)-3]; strings.HasPrefix(dom, "*") {
		ss.Dom |= robfigStar
	}
	if dow := f[len(f)-1]; strings.HasPrefix(dow, "*") {
		ss.Dow |= robfigStar
	}
}

// dayNames are the names of the days of the week, from Sunday (0).
var dayNames = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}

// asRobfigReads is spec with its day-of-week field's 7s, Sunday as cron
// also writes it, turned into robfig's 0: "7" becomes "0", and a range or
// step through 7 becomes the list of its days ("5-7" is "5,6,0"); a range
// that ends on SUN ends on 7 ("FRI-SUN" is "5,6,0"). Other specs are
// returned as they are.
func asRobfigReads(spec string) string {
	f := strings.Fields(spec)
	if len(f) != 5 && len(f) != 6 {
		return spec
	}
	items := strings.Split(f[len(f)-1], ",")
	for i, item := range items {
		rng, stepText, stepped := strings.Cut(item, "/")
		lo, hi, ranged := strings.Cut(rng, "-")
		if !ranged {
			hi = lo
		}
		day := func(s string) (int, error) {
			if d := slices.Index(dayNames, strings.ToUpper(s)); d >= 0 {
				return d, nil
			}
			return strconv.Atoi(s)
		}
		a, errLo := day(lo)
		b, errHi := day(hi)
		if ranged && strings.EqualFold(hi, dayNames[0]) && a > 0 {
			b = 7 // a range ending on SUN ends on its 7
		}
		step, errStep := 1, error(nil)
		if stepped {
			step, errStep = strconv.Atoi(stepText)
		}
		if errLo != nil || errHi != nil || errStep != nil || b != 7 || a < 0 || a > b || step < 1 || stepped && !ranged {
			continue
		}
		var days []string
		for d := a; d <= b; d += step {
			days = append(days, strconv.Itoa(d%7))
		}
		items[i] = strings.Join(days, ",")
	}
	f[len(f)-1] = strings.Join(items, ",")
	return strings.Join(f, " ")
}

// parseCron calls robfig's parser, turning its panics (v3.0.1 panics on
// input such as "TZ=UTC") into errors.
func parseCron(spec string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("unparsable: %v", r)
		}
	}()
	return parser.Parse(spec)
}

// cronFields names the fields of a 6-field spec and their values; a 5-field
// spec has all but the first.
var cronFields = [...]struct{ name, values string }{
	{"seconds", "0-59"},
	{"minute", "0-59"},
	{"hour", "0-23"},
	{"day-of-month", "1-31"},
	{"month", "1-12 or JAN-DEC"},
	{"day-of-week", "0-7 (0 and 7 are Sunday) or SUN-SAT"},
}

// cronMistake says what is wrong with a spec robfig refused with err. For a
// spec of 5 or 6 fields it finds the field at fault, by parsing each alone
// with every other field "*", and names it and what it takes: robfig's own
// message names neither.
func cronMistake(spec string, err error) string {
	const want = `expected 5 fields (minute hour day-of-month month day-of-week), an optional leading seconds field, or a descriptor such as @hourly or "@every 90s"`
	fields := strings.Fields(spec)
	names := cronFields[:]
	switch {
	case strings.EqualFold(spec, "@reboot"):
		return "@reboot has no slots for sked to keep (it would be a run at each start of a machine, which sked does not see); " +
			"start the command from the machine's boot (a systemd unit, say), or have that add a one-off job: sked add --exec -- …"
	case strings.HasPrefix(spec, "@"):
		return fmt.Sprintf("%s: %v", want, err)
	case len(fields) == 5:
		names = names[1:]
	case len(fields) != 6:
		return fmt.Sprintf("%s; it has %d", want, len(fields))
	}
	for i, f := range fields {
		probe := make([]string, len(fields))
		for j := range probe {
			probe[j] = "*"
		}
		probe[i] = f
		_, ferr := parseCron(asRobfigReads(strings.Join(probe, " ")))
		if ferr == nil {
			continue
		}
		why := strings.TrimSuffix(ferr.Error(), ": "+f)
		if word, ok := strings.CutPrefix(why, "failed to parse int from "); ok {
			word, _, _ = strings.Cut(word, ":")
			why = fmt.Sprintf("%q is neither a number nor a name", word)
		}
		return fmt.Sprintf("its %s field %q is not valid (%s); it takes %s, a list a,b, a range a-b or a step */n", names[i].name, f, why, names[i].values)
	}
	return fmt.Sprintf("%s: %v", want, err)
}

// parseEvery parses "@every D". robfig would silently raise D below 1s to 1s
// and accept negative D; sked rejects both.
func parseEvery(spec string, loc *time.Location) (*Schedule, error) {
	const hint = `give a duration of at least 1s, such as "@every 90s" or "@every 1h30m"`
	arg, ok := strings.CutPrefix(spec, "@every")
	if !ok || (arg != "" && arg[0] != ' ' && arg[0] != '\t') {
		return nil, fmt.Errorf("%q is not a schedule: @every must be followed by a space and a duration; %s", spec, hint)
	}
	arg = strings.TrimSpace(arg)
	if arg == "" {
		return nil, fmt.Errorf("%q has no duration: %s", spec, hint)
	}
	d, err := time.ParseDuration(arg)
	if err != nil {
		return nil, fmt.Errorf("%q: %q is not a duration (units: s, m, h): %s", spec, arg, hint)
	}
	if d < time.Second {
		return nil, fmt.Errorf("%q: the interval %v is below 1s: %s", spec, d, hint)
	}
	return &Schedule{every: cron.Every(d).Delay, loc: loc}, nil
}

// LoadLocation resolves an IANA zone name; "" and "UTC" are UTC. "Local" is
// refused: a schedule must not depend on the server's zone. Its error says
// what a zone name looks like, and the right case of one given in the
// wrong case.
func LoadLocation(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	if tz == "Local" {
		return nil, fmt.Errorf(`"Local" is not accepted as a timezone: name the zone, such as "Europe/London" or "America/New_York"`)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf(`%q is not an IANA timezone, such as "Europe/London" or "America/New_York"%s`, tz, zoneHint(tz))
	}
	return loc, nil
}

// zoneHint is `; did you mean "Europe/Berlin"?` for a zone name that is
// one once its words are capitalised as the tz database writes them
// ("europe/berlin", "AMERICA/NEW_YORK", "utc"), spaces around it are
// trimmed, and the words inside one part are joined by underscores as the
// database joins them ("America/NewYork", "America/New York"); "" when no
// such name is a zone.
func zoneHint(tz string) string {
	trimmed := strings.TrimSpace(tz)
	var joined []byte // "NewYork" and "New York" as "New_York"
	for i := range len(trimmed) {
		c := trimmed[i]
		switch {
		case c == ' ':
			c = '_'
		case i > 0 && 'A' <= c && c <= 'Z' && 'a' <= trimmed[i-1] && trimmed[i-1] <= 'z':
			joined = append(joined, '_')
		}
		joined = append(joined, c)
	}
	for _, cand := range []string{trimmed, string(joined)} {
		upper, title := strings.ToUpper(cand), []byte(strings.ToLower(cand))
		for i := range title {
			if (i == 0 || strings.IndexByte("/_-", title[i-1]) >= 0) && 'a' <= title[i] && title[i] <= 'z' {
				title[i] -= 'a' - 'A'
			}
		}
		for _, name := range []string{cand, string(title), upper} {
			if name != tz && name != "Local" && name != "LOCAL" && name != "" {
				if _, err := time.LoadLocation(name); err == nil {
					return fmt.Sprintf("; did you mean %q?", name)
				}
			}
		}
	}
	if name := oneEditAway(trimmed); name != "" {
		return fmt.Sprintf("; did you mean %q?", name)
	}
	return ""
}

// oneEditAway is a zone whose name is tz with one letter of its last part
// left out, added, changed or swapped with the next ("Europe/Berln",
// "Europe/Lodnon"); "" when there is none. The zones cannot be listed
// (the embedded database has no index), so each neighbour is looked up:
// some 800 lookups for a long name (30 ms here), made only for a name that
// is no zone.
func oneEditAway(tz string) string {
	slash := strings.LastIndexByte(tz, '/')
	area, city := tz[:slash+1], tz[slash+1:]
	if city == "" || len(city) > 20 {
		return ""
	}
	var tries []string
	for i := range len(city) + 1 {
		if i < len(city) {
			tries = append(tries, city[:i]+city[i+1:]) // left out
		}
		if i+1 < len(city) {
			tries = append(tries, city[:i]+city[i+1:i+2]+city[i:i+1]+city[i+2:]) // swapped
		}
		// Zone names are written Title_Case: a capital begins each word.
		letters := "abcdefghijklmnopqrstuvwxyz_"
		if i == 0 || city[i-1] == '_' {
			letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		}
		for _, c := range letters {
			tries = append(tries, city[:i]+string(c)+city[i:]) // added
			if i < len(city) {
				tries = append(tries, city[:i]+string(c)+city[i+1:]) // changed
			}
		}
	}
	for _, t := range tries {
		if name := area + t; t != "" && name != tz && name != "Local" {
			if _, err := time.LoadLocation(name); err == nil {
				return name
			}
		}
	}
	return ""
}

// Every reports whether s is an @every (elapsed-time) schedule.
func (s *Schedule) Every() bool { return s.every > 0 }

// Location returns the schedule's timezone (UTC when none was given). For
// @every schedules it has no effect on fire times.
func (s *Schedule) Location() *time.Location { return s.loc }

// Next returns the first slot strictly after t, in UTC, following the DST
// policy of the package comment. For @every D it is t+D, rounded down to the
// whole second. It returns the zero time when no slot exists within twenty
// years of t, which after Parse happens only near the end of the calendar.
func (s *Schedule) Next(t time.Time) time.Time {
	if s.every > 0 {
		return cron.ConstantDelaySchedule{Delay: s.every}.Next(t).UTC()
	}
	naive := toNaive(t, s.loc)
	horizons := 0
	for range maxNextSteps {
		w := s.spec.Next(naive)
		if w.IsZero() {
			// robfig gives up five years ahead; "0 0 29 2 *" may be eight
			// years away (2096 to 2104). Search on from where it stopped.
			if horizons++; horizons > maxHorizons {
				return time.Time{}
			}
			naive = time.Date(naive.Year()+5, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Nanosecond)
			continue
		}
		if r := s.resolve(w); r.After(t) {
			return r.UTC()
		}
		// w's first occurrence is not after t: t lies in the second pass of
		// a fall-back repeat and w was already fired. Jump to the end of the
		// repeat, or step one naive slot when that does not help.
		naive = w
		if start, _ := t.In(s.loc).ZoneBounds(); !start.IsZero() {
			if end := toNaive(start.Add(-time.Nanosecond), s.loc); end.After(w) {
				naive = end
			}
		}
	}
	return time.Time{}
}

// toNaive returns t's wall clock in loc written as a UTC time.
func toNaive(t time.Time, loc *time.Location) time.Time {
	t = t.In(loc)
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// sameWall reports whether instant t shows wall clock w (naive) in its own
// location.
func sameWall(t, w time.Time) bool {
	y, mo, d := t.Date()
	h, mi, sec := t.Clock()
	wy, wmo, wd := w.Date()
	wh, wmi, wsec := w.Clock()
	return y == wy && mo == wmo && d == wd && h == wh && mi == wmi && sec == wsec && t.Nanosecond() == w.Nanosecond()
}

// resolve maps naive wall time w to an instant in s.loc: the earliest instant
// that shows w, or, when w does not exist (a gap), the first instant after
// the gap.
func (s *Schedule) resolve(w time.Time) time.Time {
	r := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), s.loc)
	start, end := r.ZoneBounds()
	if !sameWall(r, w) {
		// A gap. time.Date normalised w with one of the two offsets around
		// it: if r shows a later wall than w it lies past the transition,
		// which is r's zone start; otherwise it lies before, and the
		// transition is r's zone end.
		if toNaive(r, s.loc).After(w) {
			if !start.IsZero() {
				return start
			}
		} else if !end.IsZero() {
			return end
		}
		return r // no transition recorded; cannot happen for a real gap
	}
	// w exists; it may exist twice (fall-back). time.Date does not promise
	// which instant it returns, so try the offset of the preceding zone and
	// keep the earliest instant that shows w.
	best := r
	if !start.IsZero() {
		_, prev := start.Add(-time.Nanosecond).In(s.loc).Zone()
		_, cur := r.Zone()
		if c := r.Add(time.Duration(cur-prev) * time.Second); c.Before(best) && sameWall(c.In(s.loc), w) {
			best = c
		}
	}
	return best
}

// Slots returns the slots in (after, until]: the earliest max of them (none
// when max <= 0) in ascending order, in UTC, and total, how many there are in
// all. For @every schedules total is exact, by arithmetic; for cron specs it
// is counted by iteration, capped at MaxSlotCount.
func (s *Schedule) Slots(after, until time.Time, max int) (slots []time.Time, total int) {
	if !until.After(after) {
		return nil, 0
	}
	if s.every > 0 {
		first := s.Next(after) // whole second
		if first.After(until) {
			return nil, 0
		}
		// first has no sub-second part and every is whole seconds, so the
		// count needs only whole seconds of until.
		n := (until.Unix()-first.Unix())/int64(s.every/time.Second) + 1
		if n > math.MaxInt {
			n = math.MaxInt
		}
		total = int(n)
		if k := min(max, total); k > 0 {
			slots = make([]time.Time, k)
			for i := range slots {
				slots[i] = first.Add(time.Duration(i) * s.every)
			}
		}
		return slots, total
	}
	for t := after; total < MaxSlotCount; total++ {
		t = s.Next(t)
		if t.IsZero() || t.After(until) {
			break
		}
		if len(slots) < max {
			slots = append(slots, t)
		}
	}
	return slots, total
}

// Gap is the time between two consecutive slots of a schedule.
type Gap struct {
	Length time.Duration
	From   time.Time // the earlier slot
}

// maxGapSlots bounds the slots Gaps walks from t, whatever it is asked.
const maxGapSlots = 20000

// gapYear is how far after t Gaps looks for the changes of the schedule's
// zone (DST, or a new standard offset): a leap year and a week, so that
// every change a zone makes each year falls inside it whatever the day Gaps
// is asked, a change on a weekday of a month too (the first Sunday of
// November is 364 to 372 days after the last).
const gapYear = (366 + 7) * 24 * time.Hour

// Gaps returns the shortest and the longest time between two consecutive
// slots among the first n slots after t and the further ones up to through
// (at most maxGapSlots in all), and, when these give a gap, those around
// each change of the zone's offset within gapYear after t: the gap across
// the change and the one after it, where a DST day's short or long gap
// lies. Each is the first such pair. They are zero when fewer than two
// slots are looked at. Each change costs some 30 slots (see gaps), so an
// every-second schedule is not walked for a year to find its DST night.
//
// The walk from t stops early, with the same answer, once it has seen the
// shortest and the longest gap the schedule's structure allows (see
// wallGaps) and the rest of it would lie within gapYear, whose changes are
// looked at anyway: an every-minute schedule's 8 days, 11,520 slots, cost
// two then.
func (s *Schedule) Gaps(t time.Time, n int, through time.Time) (shortest, longest Gap) {
	shortest, longest, _ = s.gaps(t, n, through, true)
	return shortest, longest
}

// gaps is Gaps; examined is how many slots it computed (calls of Next),
// its cost. Without early it walks every slot Gaps promises to look at, as
// tests check the early stop against.
func (s *Schedule) gaps(t time.Time, n int, through time.Time, early bool) (shortest, longest Gap, examined int) {
	next := func(u time.Time) time.Time {
		examined++
		return s.Next(u)
	}
	see := func(from, to time.Time) {
		d := to.Sub(from)
		if shortest.Length == 0 || d < shortest.Length || d == shortest.Length && from.Before(shortest.From) {
			shortest = Gap{d, from}
		}
		if d > longest.Length || d == longest.Length && from.Before(longest.From) {
			longest = Gap{d, from}
		}
	}
	// Every gap of the walk between two slots on the same side of a change
	// of the zone's offset lies in [lo, hi]; those across a change, and the
	// one after it, are looked at below. A later gap in [lo, hi] changes
	// neither answer once they are lo and hi (a tie keeps the earlier).
	// The walk's end lies within gapYear when its n slots take at most 52
	// weeks (40 a week allows for slots lost in a spring-forward) and the
	// first slot after through is less than two weeks after it.
	lo, hi, perWeek, bounded := s.wallGaps()
	stop := early && bounded &&
		(s.every > 0 || n <= 40*perWeek && !through.After(t.Add(gapYear-2*7*24*time.Hour)))
	prev := next(t)
	for i := 1; (i < n || prev.Before(through)) && i < maxGapSlots && !prev.IsZero(); i++ {
		slot := next(prev)
		if slot.IsZero() {
			break
		}
		see(prev, slot)
		prev = slot
		if stop && shortest.Length <= lo && longest.Length >= hi {
			break
		}
	}
	if s.every > 0 || longest.Length == 0 {
		// @every counts elapsed time: a zone's change moves none of its gaps.
		return shortest, longest, examined
	}
	for _, change := range zoneChanges(s.loc, t, t.Add(gapYear)) {
		// Slots on either side of the change are apart as their wall
		// clocks are; only the gap across it, and the one after a slot
		// moved to the change (spring forward), differ.
		slot := lastBefore(next, t, change)
		for after := 0; after < 2 && !slot.IsZero(); {
			following := next(slot)
			if following.IsZero() {
				break
			}
			see(slot, following)
			if !following.Before(change) {
				after++
			}
			slot = following
		}
	}
	return shortest, longest, examined
}

// wallGaps returns the shortest and the longest time between two
// consecutive slots of s as its wall clock gives them (elapsed time for
// @every), and how many slots it has a week, when its days repeat every
// week: it runs every month, and every day of the month or, for a
// day-of-week field that is not a star, every day that field names.
// Otherwise ok is false: the days between two of its runs depend on the
// month. A cron schedule's slots of a day are its hours by its minutes by
// its seconds; two runs on days k apart are k days less the span of one
// day's slots apart.
func (s *Schedule) wallGaps() (lo, hi time.Duration, perWeek int, ok bool) {
	if s.every > 0 {
		return s.every, s.every, 0, true
	}
	spec := s.spec
	const allMonths, allDom, allDow = 0x1ffe, 0xfffffffe, 0x7f // bits 1-12, 1-31, 0-6
	if spec.Month&allMonths != allMonths {
		return 0, 0, 0, false
	}
	var days []int // the days of the week s runs on
	switch star := (spec.Dom|spec.Dow)&robfigStar != 0; {
	case star && spec.Dom&allDom == allDom:
		days = bitsSet(spec.Dow, 0, 6) // a day runs when both fields name it
	case !star && (spec.Dom&allDom == allDom || spec.Dow&allDow == allDow):
		days = bitsSet(allDow, 0, 6) // a day runs when either field names it
	}
	secs := bitsSet(spec.Second, 0, 59)
	var minutes []int // minutes of the day
	for _, h := range bitsSet(spec.Hour, 0, 23) {
		for _, m := range bitsSet(spec.Minute, 0, 59) {
			minutes = append(minutes, h*60+m)
		}
	}
	if len(days) == 0 || len(secs) == 0 || len(minutes) == 0 {
		return 0, 0, 0, false
	}
	lo = time.Duration(math.MaxInt64)
	see := func(seconds int) {
		d := time.Duration(seconds) * time.Second
		lo, hi = min(lo, d), max(hi, d)
	}
	for i := 1; i < len(secs); i++ {
		see(secs[i] - secs[i-1])
	}
	first, last := secs[0], secs[len(secs)-1]
	for i := 1; i < len(minutes); i++ {
		see((minutes[i]-minutes[i-1])*60 - (last - first))
	}
	span := minutes[len(minutes)-1]*60 + last - (minutes[0]*60 + first)
	for i, d := range days {
		k := days[(i+1)%len(days)] - d
		if k <= 0 {
			k += 7
		}
		see(k*24*60*60 - span)
	}
	return lo, hi, len(days) * len(minutes) * len(secs), true
}

// bitsSet returns the numbers from lo to hi whose bit is set in bits.
func bitsSet(bits uint64, lo, hi int) []int {
	var set []int
	for i := lo; i <= hi; i++ {
		if bits&(1<<i) != 0 {
			set = append(set, i)
		}
	}
	return set
}

// lastBefore returns the last slot in (t, before), as next (a schedule's
// Next) gives slots, or the zero time when there is none. It halves the
// span to the second, cron's finest slot: some 25 calls of next for a year.
func lastBefore(next func(time.Time) time.Time, t, before time.Time) time.Time {
	isBefore := func(slot time.Time) bool { return !slot.IsZero() && slot.Before(before) }
	last := next(t)
	if !isBefore(last) {
		return time.Time{}
	}
	// next(lo) = last comes before before, next(hi) does not: no slot lies
	// in (hi, before), so the last one is in (lo, hi].
	lo, hi := t, before
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2)
		if slot := next(mid); isBefore(slot) {
			lo, last = mid, slot
		} else {
			hi = mid
		}
	}
	return last
}

// zoneChanges returns the instants in (t, until] at which loc's offset
// from UTC changes, in order.
func zoneChanges(loc *time.Location, t, until time.Time) []time.Time {
	var changes []time.Time
	for {
		_, end := t.In(loc).ZoneBounds()
		if end.IsZero() || end.After(until) {
			return changes
		}
		_, before := t.In(loc).Zone()
		if _, after := end.In(loc).Zone(); after != before {
			changes = append(changes, end)
		}
		t = end
	}
}

// Offset returns a deterministic per-job offset in [0, jitter), taken from
// the FNV-1a hash of jobID, so that jobs sharing a schedule do not all fire
// in the same instant. It is a whole number of milliseconds, the precision
// every store keeps a due time in, so that a due time read back is the one
// computed (a claim at that instant finds the slot due). It is 0 when
// jitter is under a millisecond.
func Offset(jobID string, jitter time.Duration) time.Duration {
	steps := uint64(jitter / time.Millisecond)
	if jitter <= 0 || steps == 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(jobID))
	return time.Duration(h.Sum64()%steps) * time.Millisecond
}
