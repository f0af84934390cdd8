package durabletype

import (
	"slices"
	"testing"
)

// TestRunMeanings holds every status to having one meaning: a status added
// to RunStatuses without its row in runMeanings (or the other way round)
// fails here, not silently in a layer that asks.
func TestRunMeanings(t *testing.T) {
	if len(runMeanings) != len(RunStatuses) {
		t.Fatalf("runMeanings has %d statuses, RunStatuses %d: a status is in one and not the other", len(runMeanings), len(RunStatuses))
	}
	for _, s := range RunStatuses {
		m, ok := runMeanings[s]
		if !ok {
			t.Fatalf("status %s has no meaning in runMeanings", s)
		}
		if !s.Known() {
			t.Errorf("%s is not Known", s)
		}
		if m.active && m.settled {
			t.Errorf("%s is both active and settled", s)
		}
		if m.unsuccessful && !m.settled {
			t.Errorf("%s is unsuccessful but not settled", s)
		}
		if s.InFlight() == s.Settled() {
			t.Errorf("%s: InFlight must be the opposite of Settled", s)
		}
		if s.Allows(ActionReplay) && !s.Settled() {
			t.Errorf("%s allows replay but is not settled", s)
		}
		for _, a := range m.actions {
			if !slices.Contains(RunActions, a) {
				t.Errorf("%s allows %q, which is not in RunActions", s, a)
			}
		}
	}
	for _, unknown := range []RunStatus{"", "running", "PAUSED\x00"} {
		if unknown.Known() || unknown.Settled() || unknown.InFlight() || unknown.Active() || unknown.Unsuccessful() || unknown.Allows(ActionCancel) {
			t.Errorf("unknown status %q has a meaning", unknown)
		}
	}
	for _, pred := range []func(RunStatus) bool{RunStatus.Settled, RunStatus.InFlight, RunStatus.Active, RunStatus.Unsuccessful} {
		got := RunStatusesWhere(pred)
		for _, s := range RunStatuses {
			if slices.Contains(got, s) != pred(s) {
				t.Errorf("RunStatusesWhere lists %v: wrong about %s", got, s)
			}
		}
	}
	if got := RunStatusesWhere(RunStatus.Unsuccessful); !slices.Contains(got, RunFailed) || !slices.Contains(got, RunCancelled) {
		t.Errorf("unsuccessful statuses: %v", got)
	}
}
