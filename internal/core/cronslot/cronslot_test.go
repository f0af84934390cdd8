package cronslot

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mustParse(t *testing.T, expr, zone string) *Spec {
	t.Helper()
	s, err := Parse(expr, zone, t0)
	require.NoError(t, err)
	return s
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ expr, zone string }{
		{"", ""},
		{"* * *", ""},
		{"61 * * * *", ""},
		{"@every 5m", ""},
		{"TZ=UTC * * * * *", ""},
		{"CRON_TZ=UTC * * * * *", ""},
		{"0 0 30 2 *", ""}, // never
		{"*/5 * * * *", "Mars/Olympus"},
		{"*/5 * * * *", "Local"},
		{string(make([]byte, 300)), ""},
	} {
		_, err := Parse(tc.expr, tc.zone, t0)
		require.Error(t, err, "%q %q", tc.expr, tc.zone)
		require.True(t, errors.Is(err, ErrInvalid), "%v", err)
	}
}

func TestParseValid(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{"*/5 * * * *", "* * * * * *", "@daily", "@hourly", "0 9 * * MON-FRI", "0 0 1,15 * 1"} {
		mustParse(t, expr, "Europe/Paris")
	}
}

func TestNextFiveMinutes(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "*/5 * * * *", "")
	require.Equal(t, t0.Add(5*time.Minute), s.Next(t0))
	require.Equal(t, t0.Add(5*time.Minute), s.Next(t0.Add(time.Second)))
	require.Equal(t, t0, s.Next(t0.Add(-time.Nanosecond)))
}

func TestDomOrDow(t *testing.T) {
	t.Parallel()
	// Vixie cron: day 1 of the month OR a Monday.
	s := mustParse(t, "0 0 1 * MON", "")
	// 2026-01-01 is a Thursday; the next Monday is 2026-01-05.
	require.Equal(t, time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), s.Next(t0))
}

func TestDue(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "*/5 * * * *", "")
	next := t0.Add(5 * time.Minute)

	_, ok := s.Due(next, next.Add(-time.Second))
	require.False(t, ok, "not yet due")

	d, ok := s.Due(next, next)
	require.True(t, ok)
	require.Equal(t, Decision{Fire: next, Next: next.Add(5 * time.Minute)}, d)

	// Down for three hours (36 slots due): the latest fires, 35 are missed.
	now := next.Add(3*time.Hour + 2*time.Minute)
	d, ok = s.Due(next, now)
	require.True(t, ok)
	require.Equal(t, next.Add(3*time.Hour), d.Fire)
	require.Equal(t, 36, d.Missed)
	require.Equal(t, next.Add(3*time.Hour+5*time.Minute), d.Next)

	// A year late, on a sparse schedule.
	y := mustParse(t, "0 0 1 1 *", "")
	first := y.Next(t0)
	d, ok = y.Due(first, first.AddDate(3, 0, 1))
	require.True(t, ok)
	require.Equal(t, first.AddDate(3, 0, 0), d.Fire)
	require.Equal(t, 3, d.Missed)
	require.Equal(t, first.AddDate(4, 0, 0), d.Next)

	// A dense schedule down for a day stays cheap.
	sec := mustParse(t, "* * * * * *", "")
	d, ok = sec.Due(t0, t0.Add(24*time.Hour))
	require.True(t, ok)
	require.Equal(t, t0.Add(24*time.Hour), d.Fire)
	require.Equal(t, t0.Add(24*time.Hour+time.Second), d.Next)
}

func TestDST(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	s := mustParse(t, "30 2 * * *", "America/New_York")
	// Spring forward (2026-03-08: 02:00 -> 03:00): 02:30 does not exist;
	// the slot falls an hour later, at 03:30 local time, once.
	before := time.Date(2026, 3, 7, 12, 0, 0, 0, ny)
	n := s.Next(before)
	require.Equal(t, time.Date(2026, 3, 8, 3, 30, 0, 0, ny).UTC(), n)
	require.Equal(t, time.Date(2026, 3, 9, 2, 30, 0, 0, ny).UTC(), s.Next(n))
	// Fall back (2026-11-01: 02:00 -> 01:00): 01:30 happens twice; the
	// slot fires at the first only.
	h := mustParse(t, "30 1 * * *", "America/New_York")
	first := h.Next(time.Date(2026, 10, 31, 12, 0, 0, 0, ny))
	require.Equal(t, time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC), first) // 01:30 EDT
	require.Equal(t, time.Date(2026, 11, 2, 6, 30, 0, 0, time.UTC), h.Next(first))
	// Every 30 minutes: every hour fires, the repeated one twice.
	m := mustParse(t, "*/30 * * * *", "America/New_York")
	var got []string
	for at := m.Next(time.Date(2026, 11, 1, 0, 45, 0, 0, ny)); len(got) < 4; at = m.Next(at) {
		got = append(got, at.In(ny).Format("15:04 MST"))
	}
	require.Equal(t, []string{"01:00 EDT", "01:30 EDT", "01:00 EST", "01:30 EST"}, got)
}

func TestYearOfFiveMinutes(t *testing.T) {
	t.Parallel()
	s := mustParse(t, "*/5 * * * *", "Europe/Paris")
	n := 0
	end := t0.AddDate(1, 0, 0)
	for at := s.Next(t0.Add(-time.Nanosecond)); at.Before(end); at = s.Next(at) {
		n++
	}
	require.Equal(t, 365*24*12, n)
}
