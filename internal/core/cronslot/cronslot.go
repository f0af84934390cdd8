// Package cronslot decides which slots of a cron schedule to fire. It is the
// functional core of schedules: no I/O and no clock, so both stores apply
// the same rule and tests run it over years of slots in milliseconds.
//
// Expressions are parsed by github.com/netresearch/go-cron, a maintained,
// dependency-free fork of robfig/cron v3 (unmaintained since 2020; the fork
// fixes its panics on malformed input). Only its parser and its Next are
// used, never its scheduler. The parser is set up for standard cron: five
// fields (minute, hour, day of month, month, day of week) or six with a
// leading seconds field, the descriptors @yearly, @annually, @monthly,
// @weekly, @daily, @midnight and @hourly, and the classic rule that a day
// matches when either a restricted day of month or a restricted day of week
// matches (Vixie cron's OR; the fork defaults to AND). @every is refused:
// its slots depend on when it was parsed, not on the clock, so they could not
// be keys. A time zone is given on its own (an IANA name), never inside the
// expression (TZ=, CRON_TZ=).
package cronslot

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	cron "github.com/netresearch/go-cron"
)

// ErrInvalid is wrapped by every error of Parse.
var ErrInvalid = errors.New("invalid schedule")

var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom |
	cron.Month | cron.Dow | cron.Descriptor | cron.DowOrDom)

// Spec is a parsed expression in its time zone. It is immutable and safe
// for concurrent use.
type Spec struct {
	sched cron.Schedule
	loc   *time.Location
	// hourly: the expression matches every hour of the day.
	hourly bool
}

// MaxExprLen is the longest expression accepted.
const MaxExprLen = 200

// Parse parses a cron expression and an IANA time zone name ("" means UTC).
// It refuses an expression that never fires within the parser's search
// horizon (e.g. "0 0 30 2 *"), measured from the reference time ref.
func Parse(expr, zone string, ref time.Time) (*Spec, error) {
	s, err := parse(expr, zone)
	if err != nil {
		return nil, err
	}
	if s.Next(ref).IsZero() {
		return nil, fmt.Errorf("%w: %q never fires", ErrInvalid, expr)
	}
	return s, nil
}

// cacheKey names a parsed expression in the cache.
type cacheKey struct{ expr, zone string }

// maxCached bounds the cache of parsed expressions; past it the cache
// starts again empty.
const maxCached = 10_000

var (
	cacheMu sync.Mutex
	cache   = map[cacheKey]*Spec{}
)

// parse parses an expression in a zone, or returns it from the cache:
// loading a zone reads a file, and the leader parses every schedule it fires.
func parse(expr, zone string) (*Spec, error) {
	k := cacheKey{expr, zone}
	cacheMu.Lock()
	s, ok := cache[k]
	cacheMu.Unlock()
	if ok {
		return s, nil
	}
	s, err := parseUncached(expr, zone)
	if err != nil {
		return nil, err
	}
	cacheMu.Lock()
	if len(cache) >= maxCached {
		clear(cache)
	}
	cache[k] = s
	cacheMu.Unlock()
	return s, nil
}

func parseUncached(expr, zone string) (*Spec, error) {
	if len(expr) > MaxExprLen {
		return nil, fmt.Errorf("%w: expression longer than %d bytes", ErrInvalid, MaxExprLen)
	}
	e := strings.TrimSpace(expr)
	up := strings.ToUpper(e)
	switch {
	case e == "":
		return nil, fmt.Errorf("%w: empty expression", ErrInvalid)
	case strings.HasPrefix(up, "TZ=") || strings.HasPrefix(up, "CRON_TZ="):
		return nil, fmt.Errorf("%w: %q: give the time zone on its own, not in the expression", ErrInvalid, expr)
	case strings.HasPrefix(up, "@EVERY"):
		return nil, fmt.Errorf("%w: %q: @every is not supported (its slots are not fixed by the clock); use a cron expression", ErrInvalid, expr)
	}
	loc, err := Location(zone)
	if err != nil {
		return nil, err
	}
	sched, err := parser.Parse(e)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", ErrInvalid, expr, err)
	}
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%w: %q: not a cron expression", ErrInvalid, expr)
	}
	const allHours = 1<<24 - 1
	return &Spec{sched: sched, loc: loc, hourly: spec.Hour&allHours == allHours}, nil
}

// Location loads an IANA time zone; "" is UTC. "Local" is refused: engines
// in different places would disagree on the slots.
func Location(zone string) (*time.Location, error) {
	if zone == "" {
		return time.UTC, nil
	}
	if zone == "Local" {
		return nil, fmt.Errorf("%w: time zone \"Local\": name an IANA zone (e.g. Europe/Paris) or UTC", ErrInvalid)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, fmt.Errorf("%w: time zone %q: %w", ErrInvalid, zone, err)
	}
	return loc, nil
}

// Next returns the first slot strictly after t, in UTC, or the zero time if
// there is none within the parser's horizon. Slots fall on whole seconds.
//
// Daylight saving time follows the wall clock of the schedule's zone: a
// slot in an hour skipped by the clocks moving forward falls at the same
// minutes an hour later (02:30 becomes 03:30), once. In an hour the clocks
// repeat, a schedule that fires every hour (hour field "*", e.g. "*/5 * * *
// *") fires at both occurrences, so that it keeps its pace in real time; any
// other fires at the first occurrence only (a daily "30 1 * * *" runs once
// that night), as Vixie cron does. (The parser's Next gives both; the repeat
// is dropped here.)
func (s *Spec) Next(t time.Time) time.Time {
	for {
		n := s.sched.Next(t.In(s.loc))
		if n.IsZero() {
			return n
		}
		if s.hourly || !s.repeated(n) {
			return n.UTC()
		}
		t = n
	}
}

// repeated reports whether the wall-clock time of n already happened at an
// earlier instant, because the clocks were set back in between.
func (s *Spec) repeated(n time.Time) bool {
	_, off := n.In(s.loc).Zone()
	_, before := n.Add(-24 * time.Hour).In(s.loc).Zone()
	if before <= off {
		return false
	}
	m := n.Add(-time.Duration(before-off) * time.Second)
	_, offM := m.In(s.loc).Zone()
	if offM != before {
		return false
	}
	return m.In(s.loc).Format(time.DateTime) == n.In(s.loc).Format(time.DateTime)
}

// Decision is what to do with a schedule whose next slot is due.
type Decision struct {
	// Fire is the slot to fire now: the latest slot at or before now.
	Fire time.Time
	// Missed counts the earlier due slots that are skipped (not fired).
	Missed int
	// Next is the first slot after now (zero: none left).
	Next time.Time
}

// Due applies the misfire rule to a schedule whose next unfired slot is next
// (a slot of s), at time now. ok is false when next is still in the future:
// nothing is due. Otherwise exactly one slot fires, the latest at or before
// now; any earlier due slots (missed while no engine ran, or while the
// leader was behind) are skipped and counted in Missed; and the schedule
// moves on to the first slot after now.
func (s *Spec) Due(next, now time.Time) (d Decision, ok bool) {
	if next.IsZero() || next.After(now) {
		return Decision{}, false
	}
	// Common case: next is the only due slot.
	after := s.Next(next)
	if after.IsZero() || after.After(now) {
		return Decision{Fire: next, Next: after}, true
	}
	// Several slots are due. Find the latest without walking them all:
	// look back from now over a window that doubles until it holds a slot
	// (the window never reaches back before next, which is due).
	from := next
	for back := time.Second; ; back *= 2 {
		start := now.Add(-back)
		if !start.After(next) {
			break
		}
		if c := s.Next(start.Add(-time.Nanosecond)); !c.IsZero() && !c.After(now) {
			from = c
			break
		}
	}
	fire := from
	for {
		c := s.Next(fire)
		if c.IsZero() || c.After(now) {
			break
		}
		fire = c
	}
	return Decision{Fire: fire, Missed: s.missed(next, fire), Next: s.Next(now)}, true
}

// missed counts the slots from next (included) to fire (excluded), up to a
// bound: the count is for logs, not for deciding.
func (s *Spec) missed(next, fire time.Time) int {
	const most = 10_000
	n := 0
	for t := next; t.Before(fire) && n < most; t = s.Next(t) {
		n++
	}
	return n
}
