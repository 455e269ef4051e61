package schedule

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// utc parses an RFC 3339 instant; the tests state expectations in UTC.
func utc(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UTC()
}

func mustParse(t *testing.T, spec, tz string) *Schedule {
	t.Helper()
	s, err := Parse(spec, tz)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", spec, tz, err)
	}
	return s
}

func TestParse(t *testing.T) {
	tests := []struct {
		name, spec, tz string
		every          bool
		after, next    string // optional check of Next
	}{
		{"FiveFields", "*/5 * * * *", "", false, "2026-01-01T00:01:00Z", "2026-01-01T00:05:00Z"},
		{"SixFieldsWithSeconds", "30 */5 * * * *", "", false, "2026-01-01T00:00:30Z", "2026-01-01T00:05:30Z"},
		{"Hourly", "@hourly", "", false, "2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z"},
		{"Daily", "@daily", "Europe/London", false, "2026-07-01T12:00:00Z", "2026-07-01T23:00:00Z"},
		{"Every90s", "@every 90s", "", true, "2026-01-01T00:00:00.5Z", "2026-01-01T00:01:30Z"},
		{"EveryTruncatedToSeconds", "@every 1500ms", "", true, "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z"},
		{"SurroundingSpace", "  0 9 * * 1-5 ", "America/New_York", false, "2026-01-02T15:00:00Z", "2026-01-05T14:00:00Z"},
		{"Leap29Feb", "0 0 29 2 *", "", false, "2026-01-01T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"Leap29FebAcross2100", "0 0 29 2 *", "", false, "2096-03-01T00:00:00Z", "2104-02-29T00:00:00Z"},
		{"DomOrDow", "0 0 30 2 mon", "", false, "2026-02-01T00:00:00Z", "2026-02-02T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.spec, tt.tz)
			if got, want := s.Every(), tt.every; got != want {
				t.Errorf("Every() = %v, want %v", got, want)
			}
			wantLoc := tt.tz
			if wantLoc == "" {
				wantLoc = "UTC"
			}
			if got, want := s.Location().String(), wantLoc; got != want {
				t.Errorf("Location() = %v, want %v", got, want)
			}
			if got, want := s.Next(utc(t, tt.after)), utc(t, tt.next); !got.Equal(want) {
				t.Errorf("Next(%s) = %v, want %v", tt.after, got, want)
			}
		})
	}
}

func TestParse_Errors(t *testing.T) {
	tests := []struct {
		name, spec, tz string
		want           string // substring of the error
	}{
		{"Empty", "", "", "empty"},
		{"Blank", "   ", "", "empty"},
		{"FourFields", "*/5 * * * ", "", `"*/5 * * *" is not a cron expression: expected 5 fields (minute hour day-of-month month day-of-week), an optional leading seconds field, or a descriptor such as @hourly or "@every 90s"`},
		{"SevenFields", "* * * * * * *", "", `"@every 90s"; it has 7`},
		{"MinuteOutOfRange", "60 * * * *", "", `is not a cron expression: its minute field "60" is not valid (end of range (60) above maximum (59)); it takes 0-59`},
		{"HourOutOfRange", "0 24 * * *", "", `its hour field "24" is not valid (end of range (24) above maximum (23)); it takes 0-23`},
		{"DomZero", "0 0 0 * *", "", `its day-of-month field "0" is not valid`},
		{"MonthOutOfRange", "0 0 1 13 *", "", `its month field "13" is not valid`},
		{"DowOutOfRange", "0 0 * * 8", "", `its day-of-week field "8" is not valid`},
		{"StepZero", "*/0 * * * *", "", `its minute field "*/0" is not valid`},
		{"BackwardRange", "5-1 * * * *", "", `its minute field "5-1" is not valid`},
		{"BadName", "0 0 * foo *", "", `its month field "foo" is not valid ("foo" is neither a number nor a name); it takes 1-12 or JAN-DEC`},
		{"Garbage", "every day at noon", "", `is not a cron expression: expected 5 fields`},
		{"UnknownDescriptor", "@fortnightly", "", "is not a cron expression"},
		{"SecondsOutOfRange", "61 0 * * * *", "", `its seconds field "61" is not valid`},
		{"BadDayName", "0 9 * * MON-FRU", "", `its day-of-week field "MON-FRU" is not valid ("FRU" is neither a number nor a name); it takes 0-7 (0 and 7 are Sunday) or SUN-SAT`},
		{"DayOfWeekEight", "0 3 * * 8", "", `its day-of-week field "8" is not valid`},
		{"BackwardDayRange", "0 3 * * 5-0", "", `its day-of-week field "5-0" is not valid`}, // FRI-SUN, 5-7 are the forward ones
		{"Reboot", "@reboot", "", "@reboot has no slots for sked to keep"},
		{"SevenElsewhere", "0 3 * 13 7", "", `its month field "13" is not valid`},
		{"TZPrefixAlone", "TZ=", "", `separate "timezone" field`},
		{"TZPrefix", "TZ=UTC", "", `separate "timezone" field`},
		{"TZPrefixWithSpec", "TZ=UTC 0 * * * *", "", `separate "timezone" field`},
		{"CronTZPrefix", "CRON_TZ=Europe/London 0 * * * *", "", `separate "timezone" field`},
		{"LowerCaseTZPrefix", "tz=UTC 0 * * * *", "", `separate "timezone" field`},
		{"BadTimezone", "0 * * * *", "Europe/Lodnon", `"Europe/Lodnon" is not an IANA timezone, such as "Europe/London" or "America/New_York"`},
		{"LocalTimezone", "0 * * * *", "Local", "name the zone"},
		{"TimezoneInUpperCase", "0 * * * *", "AMERICA/NEW_YORK", `; did you mean "America/New_York"?`},
		{"TimezoneUTCInLowerCase", "0 * * * *", "utc", `; did you mean "UTC"?`},
		{"TimezoneWithSpace", "0 * * * *", "Europe/Berlin ", `; did you mean "Europe/Berlin"?`},
		{"TimezoneWordsRunTogether", "0 * * * *", "America/NewYork", `; did you mean "America/New_York"?`},
		{"TimezoneWordsSpaced", "0 * * * *", "america/new york", `; did you mean "America/New_York"?`},
		{"TimezoneLetterLeftOut", "0 * * * *", "Europe/Berln", `; did you mean "Europe/Berlin"?`},
		{"TimezoneLettersSwapped", "0 * * * *", "Europe/Lodnon", `; did you mean "Europe/London"?`},
		{"TimezoneLetterChanged", "0 * * * *", "Asia/Tokya", `; did you mean "Asia/Tokyo"?`},
		{"EveryZero", "@every 0s", "", "below 1s"},
		{"EveryNegative", "@every -1s", "", "below 1s"},
		{"EverySubSecond", "@every 500ms", "", "below 1s"},
		{"EveryMissing", "@every", "", "no duration"},
		{"EveryNoSpace", "@every90s", "", "followed by a space"},
		{"EveryBadDuration", "@every ninety", "", "not a duration"},
		{"NeverFires30Feb", "0 0 30 2 *", "", "never fires"},
		{"NeverFires31Apr", "0 0 31 4,6,9,11 *", "", "never fires"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.spec, tt.tz)
			if err == nil {
				t.Fatalf("Parse(%q, %q) = %+v, want error", tt.spec, tt.tz, s)
			}
			if got, want := err.Error(), tt.want; !strings.Contains(got, want) {
				t.Errorf("error = %q, want it to contain %q", got, want)
			}
		})
	}
}

// TestSchedule_CronDays: the day fields read as cron reads them: 7 is
// Sunday as 0 is, in a list, a range and a step too; when a day-of-month
// or day-of-week field begins with "*" ("*/2"), a day must be in both,
// and when neither does, in either.
func TestSchedule_CronDays(t *testing.T) {
	from := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) // a Tuesday
	for _, c := range []struct {
		spec string
		want []string // the next fire days, "01" to "31" of December 2026
	}{
		{"0 3 * * 7", []string{"06", "13", "20", "27"}},
		{"0 3 * * 0", []string{"06", "13", "20", "27"}},
		{"0 3 * * 5-7", []string{"04", "05", "06", "11"}},
		{"0 3 * * FRI-SUN", []string{"04", "05", "06", "11"}}, // ends on Sunday, 7
		{"0 3 * * sat-sun", []string{"05", "06", "12", "13"}},
		{"0 3 * * SUN-SUN", []string{"06", "13", "20", "27"}}, // Sunday alone
		{"0 3 * * 0-0", []string{"06", "13", "20", "27"}},

		{"0 3 * * 6,7", []string{"05", "06", "12", "13"}},
		{"0 3 * * 1-7/3", []string{"03", "06", "07", "10"}}, // Mon, Thu, Sun
		{"0 8 */2 * 1", []string{"07", "21"}},               // Mondays that are odd days
		{"0 8 * * 1", []string{"07", "14", "21", "28"}},
		{"0 8 1-7 * 1", []string{"01", "02", "03", "04"}}, // the 1st to 7th, and Mondays
		{"0 8 */5 * 2", []string{"01"}},                   // Tuesdays that are the 1st, 6th, 11th…
	} {
		s, err := Parse(c.spec, "UTC")
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.spec, err)
		}
		var got []string
		for at := from; len(got) < len(c.want); {
			at = s.Next(at)
			if at.Month() != time.December {
				break
			}
			got = append(got, at.Format("02"))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%q fires on December %v; want %v", c.spec, got, c.want)
		}
	}
}

// TestSchedule_Next_DST checks the DST policy of the package comment. The
// transitions were read from Go's tzdata (2026):
//
//	Europe/London       2026-03-29 01:00Z GMT→BST (01:00→02:00); 2026-10-25 01:00Z BST→GMT (02:00→01:00)
//	America/New_York    2026-03-08 07:00Z EST→EDT (02:00→03:00); 2026-11-01 06:00Z EDT→EST (02:00→01:00)
//	Australia/Lord_Howe 2026-10-03 15:30Z +1030→+11 (02:00→02:30); 2026-04-04 15:00Z +11→+1030 (02:00→01:30)
func TestSchedule_Next_DST(t *testing.T) {
	tests := []struct {
		name, spec, tz string
		after, until   string
		want           []string
	}{
		{
			name: "NewYorkDailyInGapFiresAfterGap", spec: "30 2 * * *", tz: "America/New_York",
			after: "2026-03-07T12:00:00Z", until: "2026-03-09T12:00:00Z",
			want: []string{
				"2026-03-08T07:00:00Z", // 02:30 does not exist: 03:00 EDT, once
				"2026-03-09T06:30:00Z", // 02:30 EDT
			},
		},
		{
			name: "NewYorkDailyAroundSpringForward", spec: "30 2 * * *", tz: "America/New_York",
			after: "2026-03-07T00:00:00Z", until: "2026-03-10T00:00:00Z",
			want: []string{
				"2026-03-07T07:30:00Z", // 02:30 EST
				"2026-03-08T07:00:00Z", // 02:30 does not exist: 03:00 EDT
				"2026-03-09T06:30:00Z", // 02:30 EDT
			},
		},
		{
			name: "NewYorkHourlyAcrossSpringForward", spec: "0 * * * *", tz: "America/New_York",
			after: "2026-03-08T04:30:00Z", until: "2026-03-08T09:00:00Z",
			want: []string{
				"2026-03-08T05:00:00Z", // 00:00 EST
				"2026-03-08T06:00:00Z", // 01:00 EST
				"2026-03-08T07:00:00Z", // 02:00 is in the gap: 03:00 EDT
				"2026-03-08T08:00:00Z", // 04:00 EDT
				"2026-03-08T09:00:00Z", // 05:00 EDT
			},
		},
		{
			name: "NewYorkHourlyAcrossFallBack", spec: "0 * * * *", tz: "America/New_York",
			after: "2026-11-01T03:30:00Z", until: "2026-11-01T09:00:00Z",
			want: []string{
				"2026-11-01T04:00:00Z", // 00:00 EDT
				"2026-11-01T05:00:00Z", // 01:00 EDT; 01:00 EST (06:00Z) is not fired again
				"2026-11-01T07:00:00Z", // 02:00 EST
				"2026-11-01T08:00:00Z", // 03:00 EST
				"2026-11-01T09:00:00Z", // 04:00 EST
			},
		},
		{
			name: "NewYorkDailyInRepeatFiresOnce", spec: "30 1 * * *", tz: "America/New_York",
			after: "2026-10-31T12:00:00Z", until: "2026-11-02T12:00:00Z",
			want: []string{
				"2026-11-01T05:30:00Z", // 01:30 EDT, not again at 01:30 EST (06:30Z)
				"2026-11-02T06:30:00Z", // 01:30 EST
			},
		},
		{
			name: "NewYorkQuarterHourlyAcrossFallBack", spec: "*/15 * * * *", tz: "America/New_York",
			after: "2026-11-01T05:30:00Z", until: "2026-11-01T07:15:00Z",
			want: []string{
				"2026-11-01T05:45:00Z", // 01:45 EDT; 01:00–01:45 EST are not fired again
				"2026-11-01T07:00:00Z", // 02:00 EST
				"2026-11-01T07:15:00Z",
			},
		},
		{
			name: "LondonDailyInGapFiresAfterGap", spec: "30 1 * * *", tz: "Europe/London",
			after: "2026-03-28T12:00:00Z", until: "2026-03-30T12:00:00Z",
			want: []string{
				"2026-03-29T01:00:00Z", // 01:30 does not exist: 02:00 BST
				"2026-03-30T00:30:00Z", // 01:30 BST
			},
		},
		{
			name: "LondonHourlyAcrossSpringForward", spec: "0 * * * *", tz: "Europe/London",
			after: "2026-03-28T23:30:00Z", until: "2026-03-29T03:00:00Z",
			want: []string{
				"2026-03-29T00:00:00Z", // 00:00 GMT
				"2026-03-29T01:00:00Z", // 01:00 is in the gap: 02:00 BST (and 02:00 BST itself)
				"2026-03-29T02:00:00Z", // 03:00 BST
				"2026-03-29T03:00:00Z", // 04:00 BST
			},
		},
		{
			name: "LondonHourlyAcrossFallBack", spec: "0 * * * *", tz: "Europe/London",
			after: "2026-10-24T22:30:00Z", until: "2026-10-25T03:00:00Z",
			want: []string{
				"2026-10-24T23:00:00Z", // 00:00 BST
				"2026-10-25T00:00:00Z", // 01:00 BST; 01:00 GMT (01:00Z) is not fired again
				"2026-10-25T02:00:00Z", // 02:00 GMT
				"2026-10-25T03:00:00Z", // 03:00 GMT
			},
		},
		{
			name: "LondonDailyInRepeatFiresOnce", spec: "30 1 * * *", tz: "Europe/London",
			after: "2026-10-24T12:00:00Z", until: "2026-10-26T12:00:00Z",
			want: []string{
				"2026-10-25T00:30:00Z", // 01:30 BST, not again at 01:30 GMT
				"2026-10-26T01:30:00Z", // 01:30 GMT
			},
		},
		{
			name: "LordHoweInGapFiresAfterGap", spec: "15 2 * * *", tz: "Australia/Lord_Howe",
			after: "2026-10-02T12:00:00Z", until: "2026-10-04T18:00:00Z",
			want: []string{
				"2026-10-02T15:45:00Z", // 02:15 +1030
				"2026-10-03T15:30:00Z", // 02:15 does not exist: 02:30 +11
				"2026-10-04T15:15:00Z", // 02:15 +11
			},
		},
		{
			name: "LordHoweHalfHourlyAcrossSpringForward", spec: "*/30 * * * *", tz: "Australia/Lord_Howe",
			after: "2026-10-03T14:30:00Z", until: "2026-10-03T16:00:00Z",
			want: []string{
				"2026-10-03T15:00:00Z", // 01:30 +1030
				"2026-10-03T15:30:00Z", // 02:00 is in the gap: 02:30 +11 (and 02:30 itself)
				"2026-10-03T16:00:00Z", // 03:00 +11
			},
		},
		{
			name: "LordHoweInRepeatFiresOnce", spec: "45 1 * * *", tz: "Australia/Lord_Howe",
			after: "2026-04-03T12:00:00Z", until: "2026-04-05T18:00:00Z",
			want: []string{
				"2026-04-03T14:45:00Z", // 01:45 +11
				"2026-04-04T14:45:00Z", // 01:45 +11, not again at 01:45 +1030 (15:15Z)
				"2026-04-05T15:15:00Z", // 01:45 +1030
			},
		},
		{
			name: "LordHoweHalfHourlyAcrossFallBack", spec: "*/30 * * * *", tz: "Australia/Lord_Howe",
			after: "2026-04-04T14:00:00Z", until: "2026-04-04T16:00:00Z",
			want: []string{
				"2026-04-04T14:30:00Z", // 01:30 +11; 01:30 +1030 (15:00Z) is not fired again
				"2026-04-04T15:30:00Z", // 02:00 +1030
				"2026-04-04T16:00:00Z", // 02:30 +1030
			},
		},
		{
			name: "EveryHourAcrossSpringForward", spec: "@every 1h", tz: "America/New_York",
			after: "2026-03-08T05:00:00Z", until: "2026-03-08T09:00:00Z",
			want: []string{
				"2026-03-08T06:00:00Z",
				"2026-03-08T07:00:00Z",
				"2026-03-08T08:00:00Z",
				"2026-03-08T09:00:00Z",
			},
		},
		{
			name: "EveryHourAcrossFallBack", spec: "@every 1h", tz: "Europe/London",
			after: "2026-10-24T23:00:00Z", until: "2026-10-25T03:00:00Z",
			want: []string{
				"2026-10-25T00:00:00Z",
				"2026-10-25T01:00:00Z",
				"2026-10-25T02:00:00Z",
				"2026-10-25T03:00:00Z",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.spec, tt.tz)
			var want []time.Time
			for _, w := range tt.want {
				want = append(want, utc(t, w))
			}
			// Walk with Next, as the scheduler does from each slot.
			var got []time.Time
			until := utc(t, tt.until)
			for at := utc(t, tt.after); ; {
				at = s.Next(at)
				if at.IsZero() || at.After(until) {
					break
				}
				got = append(got, at)
			}
			if !slices.Equal(got, want) {
				t.Errorf("slots:\n got %v\nwant %v", got, want)
			}
			slots, total := s.Slots(utc(t, tt.after), until, 100)
			if !slices.Equal(slots, want) || total != len(want) {
				t.Errorf("Slots = %v, %d\nwant %v, %d", slots, total, want, len(want))
			}
		})
	}
}

// TestSchedule_Next_InRepeat starts Next inside the second pass of a
// fall-back repeat: wall times already fired in the first pass are not
// fired again, and Next is strictly after t.
func TestSchedule_Next_InRepeat(t *testing.T) {
	tests := []struct {
		name, spec, tz, t, want string
	}{
		{"QuarterHourly", "*/15 * * * *", "America/New_York", "2026-11-01T06:10:00Z", "2026-11-01T07:00:00Z"},   // 01:10 EST → 02:00 EST
		{"Secondly", "* * * * * *", "America/New_York", "2026-11-01T06:59:58.5Z", "2026-11-01T07:00:00Z"},       // 01:59:59 already fired in EDT; 02:00:00 EST is new
		{"SecondlyStart", "* * * * * *", "America/New_York", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"},    // 01:00:00 EST → 02:00:00 EST
		{"DailyAtRepeat", "30 1 * * *", "America/New_York", "2026-11-01T06:00:00Z", "2026-11-02T06:30:00Z"},     // 01:30 EST is not fired
		{"AtFirstOccurrence", "30 1 * * *", "America/New_York", "2026-11-01T05:29:59Z", "2026-11-01T05:30:00Z"}, // 01:29:59 EDT → 01:30 EDT
		{"AtSlot", "30 1 * * *", "America/New_York", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"},            // strictly after
		{"LordHowe", "*/10 * * * *", "Australia/Lord_Howe", "2026-04-04T15:05:00Z", "2026-04-04T15:30:00Z"},     // 01:35 +1030 → 02:00 +1030
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.spec, tt.tz)
			if got, want := s.Next(utc(t, tt.t)), utc(t, tt.want); !got.Equal(want) {
				t.Errorf("Next(%s) = %v, want %v", tt.t, got, want)
			}
		})
	}
}

func TestSchedule_Slots(t *testing.T) {
	t0 := utc(t, "2026-01-01T00:00:00Z")
	tests := []struct {
		name        string
		spec        string
		after, till time.Time
		max         int
		wantTotal   int
		wantSlots   []time.Time // nil: only the length is checked against min(max, total)
	}{
		{"EverySecondFor30Days", "@every 1s", t0, t0.AddDate(0, 0, 30), 3, 2_592_000, []time.Time{t0.Add(time.Second), t0.Add(2 * time.Second), t0.Add(3 * time.Second)}},
		{"EverySecondSubSecondAfter", "@every 1s", t0.Add(500 * time.Millisecond), t0.Add(3 * time.Second), 10, 3, []time.Time{t0.Add(time.Second), t0.Add(2 * time.Second), t0.Add(3 * time.Second)}},
		{"Every90sNotDivisible", "@every 90s", t0, t0.Add(10 * time.Minute), 100, 6, nil},
		{"EveryBeyondRange", "@every 1h", t0, t0.Add(59 * time.Minute), 10, 0, nil},
		{"EveryMinuteForADay", "* * * * *", t0, t0.AddDate(0, 0, 1), 2, 1440, []time.Time{t0.Add(time.Minute), t0.Add(2 * time.Minute)}},
		{"EveryMinuteMaxZero", "* * * * *", t0, t0.AddDate(0, 0, 1), 0, 1440, nil},
		{"UntilIsInclusive", "0 * * * *", t0, t0.Add(time.Hour), 10, 1, []time.Time{t0.Add(time.Hour)}},
		{"AfterIsExclusive", "0 * * * *", t0, t0.Add(59 * time.Minute), 10, 0, nil},
		{"EmptyRange", "* * * * *", t0, t0, 10, 0, nil},
		{"BackwardRange", "@every 1s", t0, t0.Add(-time.Hour), 10, 0, nil},
		{"CronCapped", "* * * * * *", t0, t0.AddDate(0, 0, 30), 1, MaxSlotCount, []time.Time{t0.Add(time.Second)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.spec, "")
			slots, total := s.Slots(tt.after, tt.till, tt.max)
			if got, want := total, tt.wantTotal; got != want {
				t.Errorf("total = %d, want %d", got, want)
			}
			if got, want := len(slots), max(0, min(tt.max, tt.wantTotal)); got != want {
				t.Errorf("len(slots) = %d, want %d", got, want)
			}
			if tt.wantSlots != nil && !slices.Equal(slots, tt.wantSlots) {
				t.Errorf("slots = %v, want %v", slots, tt.wantSlots)
			}
			for i, v := range slots {
				if !v.After(tt.after) || v.After(tt.till) || (i > 0 && !v.After(slots[i-1])) || v.Location() != time.UTC {
					t.Errorf("slot %d = %v is out of order or outside (%v, %v]", i, v, tt.after, tt.till)
				}
			}
		})
	}
}

func TestSchedule_Gaps(t *testing.T) {
	t0 := utc(t, "2026-01-01T00:00:00Z") // a Thursday
	tests := []struct {
		name, spec, tz string
		n              int
		shortest       time.Duration
		shortestFrom   string // "": zero time
		longest        time.Duration
		longestFrom    string
		through        time.Time // zero: n slots
	}{
		{"Every", "@every 90s", "", 1000, 90 * time.Second, "2026-01-01T00:01:30Z", 90 * time.Second, "2026-01-01T00:01:30Z", time.Time{}},
		{"Hourly", "@hourly", "", 1000, time.Hour, "2026-01-01T01:00:00Z", time.Hour, "2026-01-01T01:00:00Z", time.Time{}},
		{"WeekdaysFromThursday", "0 9 * * 1-5", "", 1000, 24 * time.Hour, "2026-01-01T09:00:00Z", 72 * time.Hour, "2026-01-02T09:00:00Z", time.Time{}},
		{"FridaysAndMondays", "0 9 * * 1,5", "", 500, 72 * time.Hour, "2026-01-02T09:00:00Z", 96 * time.Hour, "2026-01-05T09:00:00Z", time.Time{}},
		{"OnlyTwoSlots", "0 9 * * 1-5", "", 2, 24 * time.Hour, "2026-01-01T09:00:00Z", 24 * time.Hour, "2026-01-01T09:00:00Z", time.Time{}},
		{"TwiceADay", "0 6,8 * * *", "", 1000, 2 * time.Hour, "2026-01-01T06:00:00Z", 22 * time.Hour, "2026-01-01T08:00:00Z", time.Time{}},
		{"DST", "30 2 * * *", "America/New_York", 1000, 23*time.Hour + 30*time.Minute, "2026-03-07T07:30:00Z", 25 * time.Hour, "2026-10-31T06:30:00Z", time.Time{}},
		{"Months", "0 0 1 * *", "", 1000, 28 * 24 * time.Hour, "2026-02-01T00:00:00Z", 31 * 24 * time.Hour, "2026-03-01T00:00:00Z", time.Time{}},
		{"OneSlot", "@hourly", "", 1, 0, "", 0, "", time.Time{}},
	}
	at := func(s string) time.Time {
		if s == "" {
			return time.Time{}
		}
		return utc(t, s)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shortest, longest := mustParse(t, tt.spec, tt.tz).Gaps(t0, tt.n, tt.through)
			if want := (Gap{tt.shortest, at(tt.shortestFrom)}); shortest.Length != want.Length || !shortest.From.Equal(want.From) {
				t.Errorf("shortest gap = %v from %v, want %v from %v", shortest.Length, shortest.From, want.Length, want.From)
			}
			if want := (Gap{tt.longest, at(tt.longestFrom)}); longest.Length != want.Length || !longest.From.Equal(want.From) {
				t.Errorf("longest gap = %v from %v, want %v from %v", longest.Length, longest.From, want.Length, want.From)
			}
		})
	}
}

// TestSchedule_GapsThrough: from a Monday, the first 500 slots of business
// hours end before the weekend; looking through a week and a day finds its
// gap, as from any other day.
func TestSchedule_GapsThrough(t *testing.T) {
	s := mustParse(t, "*/5 9-17 * * 1-5", "")
	monday := utc(t, "2026-01-05T00:00:00Z")
	if _, longest := s.Gaps(monday, 500, monday); longest.Length != 15*time.Hour+5*time.Minute {
		t.Fatalf("500 slots from Monday: longest gap %v; want the night's, 15h5m", longest.Length)
	}
	_, longest := s.Gaps(monday, 500, monday.Add(8*24*time.Hour))
	if want := (Gap{63*time.Hour + 5*time.Minute, utc(t, "2026-01-09T17:55:00Z")}); longest.Length != want.Length || !longest.From.Equal(want.From) {
		t.Fatalf("through a week and a day from Monday: longest gap %v from %v; want the weekend, %v from %v", longest.Length, longest.From, want.Length, want.From)
	}
}

func TestOffset(t *testing.T) {
	for _, jitter := range []time.Duration{time.Millisecond, 1500 * time.Microsecond, time.Second, time.Minute, 7 * time.Hour} {
		for _, id := range []string{"", "a", "job-1", "01J9Z8K3G7ZC0Y5V0X7W6T2QHN"} {
			got := Offset(id, jitter)
			if got < 0 || got >= jitter {
				t.Errorf("Offset(%q, %v) = %v, want in [0, %v)", id, jitter, got, jitter)
			}
			if again := Offset(id, jitter); again != got {
				t.Errorf("Offset(%q, %v) = %v then %v, want deterministic", id, jitter, got, again)
			}
			// Stores keep due times to the millisecond: an offset finer
			// than that makes the due time read back earlier than the one
			// a claim computes, and a claim at it miss its slot.
			if got%time.Millisecond != 0 {
				t.Errorf("Offset(%q, %v) = %v, want whole milliseconds", id, jitter, got)
			}
		}
	}
	for _, jitter := range []time.Duration{0, -time.Second, time.Nanosecond, time.Millisecond - 1} {
		if got, want := Offset("job-1", jitter), time.Duration(0); got != want {
			t.Errorf("Offset(job-1, %v) = %v, want %v", jitter, got, want)
		}
	}
	// Different ids spread out rather than collide.
	seen := map[time.Duration]bool{}
	for i := range 100 {
		seen[Offset(strings.Repeat("x", i), time.Hour)] = true
	}
	if got := len(seen); got < 95 {
		t.Errorf("100 ids gave %d distinct offsets in an hour, want nearly 100", got)
	}
}

// TestParseCron_Panic checks that a panic inside robfig/cron v3.0.1 (it
// slices past the end of "TZ=UTC") comes back as an error. Parse refuses the
// prefix before calling robfig, so this calls the wrapper directly.
func TestParseCron_Panic(t *testing.T) {
	for _, spec := range []string{"TZ=", "TZ=UTC", "CRON_TZ=UTC"} {
		if _, err := parseCron(spec); err == nil {
			t.Errorf("parseCron(%q): got nil error, want one", spec)
		}
	}
}

// TestSchedule_GapsAcrossZoneChanges: the gaps a zone's offset change makes
// months ahead count, beyond the slots walked from t: hourly in New York
// has a 2h gap at the November fall-back, hourly on Lord Howe (a 30-minute
// DST) a 30m one at the October spring-forward, and a daily 02:30 in New
// York a 23h30m one in March, seen from September.
func TestSchedule_GapsAcrossZoneChanges(t *testing.T) {
	tests := []struct {
		name, spec, tz, now string
		shortest, longest   Gap
	}{
		{"NewYorkFallBack", "0 * * * *", "America/New_York", "2026-09-25T12:00:00Z",
			Gap{time.Hour, utc(t, "2026-09-25T13:00:00Z")}, Gap{2 * time.Hour, utc(t, "2026-11-01T05:00:00Z")}},
		{"LordHoweSpringForward", "0 * * * *", "Australia/Lord_Howe", "2026-09-25T00:00:00Z",
			Gap{30 * time.Minute, utc(t, "2026-10-03T15:30:00Z")}, Gap{90 * time.Minute, utc(t, "2027-04-03T14:00:00Z")}},
		{"NewYorkDailyFromSeptember", "30 2 * * *", "America/New_York", "2026-09-25T00:00:00Z",
			Gap{23*time.Hour + 30*time.Minute, utc(t, "2027-03-13T07:30:00Z")}, Gap{25 * time.Hour, utc(t, "2026-10-31T06:30:00Z")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := utc(t, tt.now)
			shortest, longest := mustParse(t, tt.spec, tt.tz).Gaps(now, 500, now.Add(8*24*time.Hour))
			if shortest.Length != tt.shortest.Length || !shortest.From.Equal(tt.shortest.From) {
				t.Errorf("shortest gap = %v from %v, want %v from %v", shortest.Length, shortest.From, tt.shortest.Length, tt.shortest.From)
			}
			if longest.Length != tt.longest.Length || !longest.From.Equal(tt.longest.From) {
				t.Errorf("longest gap = %v from %v, want %v from %v", longest.Length, longest.From, tt.longest.Length, tt.longest.From)
			}
		})
	}
}

// TestSchedule_GapsAnyDay: the shortest and longest gap of a schedule are
// the same whatever the day of the year they are asked.
func TestSchedule_GapsAnyDay(t *testing.T) {
	tests := []struct {
		spec, tz          string
		shortest, longest time.Duration
	}{
		{"0 * * * *", "America/New_York", time.Hour, 2 * time.Hour},
		{"0 * * * *", "Australia/Lord_Howe", 30 * time.Minute, 90 * time.Minute},
		{"30 2 * * *", "America/New_York", 23*time.Hour + 30*time.Minute, 25 * time.Hour},
		{"*/5 9-17 * * 1-5", "Europe/London", 5 * time.Minute, 64*time.Hour + 5*time.Minute},
	}
	start := utc(t, "2026-01-01T00:00:00Z")
	for _, tt := range tests {
		t.Run(tt.spec+" "+tt.tz, func(t *testing.T) {
			t.Parallel()
			s := mustParse(t, tt.spec, tt.tz)
			for day := range 366 {
				now := start.Add(time.Duration(day)*24*time.Hour + 7*time.Hour)
				shortest, longest := s.Gaps(now, 500, now.Add(8*24*time.Hour))
				if shortest.Length != tt.shortest || longest.Length != tt.longest {
					t.Fatalf("from %v: gaps %v (from %v) to %v (from %v); want %v to %v, as from any day",
						now, shortest.Length, shortest.From, longest.Length, longest.From, tt.shortest, tt.longest)
				}
			}
		})
	}
}

// TestSchedule_GapsCost: an every-second schedule is not walked for a
// year to find its DST nights: Gaps examines the slots it walks from t
// (maxGapSlots at most) and a few dozen around each change of the zone.
func TestSchedule_GapsCost(t *testing.T) {
	now := utc(t, "2026-11-01T07:00:00Z") // New York's fall-back an hour ago: the next is 371 days away
	for _, tz := range []string{"America/New_York", "Australia/Lord_Howe", "UTC"} {
		s := mustParse(t, "* * * * * *", tz)
		_, longest, examined := s.gaps(now, 500, now.Add(8*24*time.Hour), true)
		t.Logf("%s: longest %v, %d slots examined", tz, longest.Length, examined)
		if limit := maxGapSlots + 2*100; examined > limit {
			t.Errorf("%s: %d slots examined; want at most %d", tz, examined, limit)
		}
		if want := time.Hour + time.Second; tz == "America/New_York" && longest.Length != want {
			t.Errorf("%s: longest gap %v; want %v, the fall-back's", tz, longest.Length, want)
		}
	}
	// A long cycle is walked as before: its first slots span decades.
	_, longest, examined := mustParse(t, "0 0 29 2 *", "Europe/Berlin").gaps(now, 500, now.Add(8*24*time.Hour), true)
	t.Logf("0 0 29 2 *: longest %v, %d slots examined", longest.Length, examined)
	if want := utc(t, "2104-02-28T23:00:00Z").Sub(utc(t, "2096-02-28T23:00:00Z")); longest.Length != want {
		t.Errorf("0 0 29 2 *: longest gap %v; want %v, 2096 to 2104", longest.Length, want)
	}
}

// TestSchedule_GapsStopsEarly: Gaps stops walking a schedule whose days
// repeat every week once it has seen its shortest and longest gaps, and
// answers as the whole walk does, gap and first slot, from any hour of
// the year, in zones with and without DST and for schedules whose days
// depend on the month.
func TestSchedule_GapsStopsEarly(t *testing.T) {
	specs := []string{
		"* * * * *", "*/5 * * * *", "0 * * * *", "30 2 * * *", "0 6,8 * * *", "*/5 9-17 * * 1-5",
		"0 9 * * 1-5", "15,45 1-3 * * 0,3", "*/20 */7 * * *", "0 0 1 * *", "0 8 */2 * 1", "0 * * 1-6 *",
		"30 */10 * * * *", "*/10 * * * 0,3", "* 22 * * 2,3,6", "@hourly", "@every 7m", "59 23 * * *", "0 0,23 * * *",
	}
	zones := []string{"UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Pacific/Apia"}
	start := utc(t, "2026-01-01T00:00:00Z")
	for _, tz := range zones {
		t.Run(tz, func(t *testing.T) {
			t.Parallel()
			for _, spec := range specs {
				s := mustParse(t, spec, tz)
				for h := 0; h < 366*24; h += 24*7*3 + 5 {
					now := start.Add(time.Duration(h)*time.Hour + 17*time.Minute)
					through := now.Add(8 * 24 * time.Hour)
					shortest, longest, _ := s.gaps(now, 500, through, true)
					wantShortest, wantLongest, _ := s.gaps(now, 500, through, false)
					if shortest != wantShortest || longest != wantLongest {
						t.Fatalf("%q from %v: gaps %v from %v to %v from %v; the whole walk's are %v from %v to %v from %v",
							spec, now, shortest.Length, shortest.From, longest.Length, longest.From,
							wantShortest.Length, wantShortest.From, wantLongest.Length, wantLongest.From)
					}
				}
			}
		})
	}
	// The 2011 day Samoa skipped: a change of a whole day, within 8 days.
	now := utc(t, "2011-12-27T00:00:00Z")
	for _, spec := range specs {
		s := mustParse(t, spec, "Pacific/Apia")
		shortest, longest, _ := s.gaps(now, 500, now.Add(8*24*time.Hour), true)
		wantShortest, wantLongest, _ := s.gaps(now, 500, now.Add(8*24*time.Hour), false)
		if shortest != wantShortest || longest != wantLongest {
			t.Errorf("%q from %v: gaps %v to %v; the whole walk's are %v to %v", spec, now, shortest, longest, wantShortest, wantLongest)
		}
	}
}

// TestSchedule_GapsCostEveryMinute: an every-minute schedule's gaps cost a
// few slots and those around its zone's changes, not its 8 days' 11,520.
func TestSchedule_GapsCostEveryMinute(t *testing.T) {
	now := utc(t, "2026-12-02T16:00:00Z")
	for _, tz := range []string{"UTC", "Europe/Berlin"} {
		_, _, examined := mustParse(t, "* * * * *", tz).gaps(now, 500, now.Add(8*24*time.Hour), true)
		if limit := 2 + 2*100; examined > limit {
			t.Errorf("%s: %d slots examined; want at most %d", tz, examined, limit)
		}
	}
}
