package durablejson

import (
	"fmt"
	"slices"
	"strings"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// StatusMeaning says what one run status means, as durabletype's
// predicates say it: clients (the dashboard) decide from it instead of
// listing statuses of their own.
type StatusMeaning struct {
	Status durabletype.RunStatus `json:"status"`
	// Settled: the run is over (RunStatus.Settled).
	Settled bool `json:"settled"`
	// InFlight: the run is not settled (RunStatus.InFlight): its waits
	// are shown, it is flagged unserved, the stats count it in flight.
	InFlight bool `json:"in_flight"`
	// Active: the run moves on by itself (RunStatus.Active).
	Active bool `json:"active"`
	// Unsuccessful: the run settled without completing
	// (RunStatus.Unsuccessful).
	Unsuccessful bool `json:"unsuccessful"`
	// Actions are what an operator may do to such a run
	// (RunStatus.Allows), never null.
	Actions []durabletype.RunAction `json:"actions"`
}

// StatusGroup is a name a status filter takes for every status of one
// meaning ("in_flight": every status in flight).
type StatusGroup struct {
	Name     string                  `json:"name"`
	Statuses []durabletype.RunStatus `json:"statuses"`
}

// Statuses is the document of GET /api/v1/statuses: every run status
// with its meaning, in the order of durabletype.RunStatuses (the order
// lists and tables show them), and the groups a status filter accepts.
type Statuses struct {
	Statuses []StatusMeaning `json:"statuses"`
	Groups   []StatusGroup   `json:"groups"`
}

// statusGroup is a name for the statuses for which pred holds.
type statusGroup struct {
	name string
	pred func(durabletype.RunStatus) bool
}

// statusGroups are the names a status filter accepts for a meaning, with
// the predicate that picks their statuses.
var statusGroups = []statusGroup{
	{"in_flight", durabletype.RunStatus.InFlight},
	{"settled", durabletype.RunStatus.Settled},
	{"unsuccessful", durabletype.RunStatus.Unsuccessful},
}

// NewStatuses describes every run status (durabletype.RunStatuses) and the
// status groups.
func NewStatuses() Statuses {
	out := Statuses{}
	for _, s := range durabletype.RunStatuses {
		m := StatusMeaning{Status: s, Settled: s.Settled(), InFlight: s.InFlight(), Active: s.Active(),
			Unsuccessful: s.Unsuccessful(), Actions: []durabletype.RunAction{}}
		for _, a := range durabletype.RunActions {
			if s.Allows(a) {
				m.Actions = append(m.Actions, a)
			}
		}
		out.Statuses = append(out.Statuses, m)
	}
	for _, g := range statusGroups {
		out.Groups = append(out.Groups, StatusGroup{Name: g.name, Statuses: durabletype.RunStatusesWhere(g.pred)})
	}
	return out
}

// StatusWords lists what a status filter accepts, for help texts and
// errors: every status in lower case, then the groups.
func StatusWords() []string {
	var out []string
	for _, s := range durabletype.RunStatuses {
		out = append(out, strings.ToLower(string(s)))
	}
	for _, g := range statusGroups {
		out = append(out, g.name)
	}
	return out
}

// UnknownStatusError is the error of ParseStatuses for a word that is
// neither a run status nor a group.
type UnknownStatusError struct {
	// Word is the word as given.
	Word string
}

func (e *UnknownStatusError) Error() string {
	return fmt.Sprintf("unknown status %s: want %s, comma-separated", dag.Quote(e.Word), strings.Join(StatusWords(), ", "))
}

// ParseStatuses reads a status filter: comma-separated statuses in any
// case, or the name of a group (in_flight, settled, unsuccessful) for
// every status of its meaning; a status named twice counts once. A word
// that is neither, a blank one included, is an *UnknownStatusError.
func ParseStatuses(s string) ([]durabletype.RunStatus, error) {
	var out []durabletype.RunStatus
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		sts := []durabletype.RunStatus{durabletype.RunStatus(strings.ToUpper(part))}
		if i := slices.IndexFunc(statusGroups, func(g statusGroup) bool { return strings.EqualFold(g.name, part) }); i >= 0 {
			sts = durabletype.RunStatusesWhere(statusGroups[i].pred)
		} else if !sts[0].Known() {
			return nil, &UnknownStatusError{Word: part}
		}
		for _, st := range sts {
			if !slices.Contains(out, st) {
				out = append(out, st)
			}
		}
	}
	return out, nil
}
