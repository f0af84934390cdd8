package dag

import (
	"cmp"
	"slices"
	"time"

	"github.com/effectivelabs/durable/store"
)

// Minute is the minute t falls in: settled runs are counted by the minute
// they settled in (store.Stats). Minutes are whole minutes since the Unix
// epoch (time.Truncate counts from year 1, a whole number of minutes
// before it), as in SQL.
func Minute(t time.Time) time.Time { return t.Truncate(time.Minute) }

// Counted reports whether the settled runs counted in minute fall within
// a stats window ending at now: the minute that holds now-window and every
// later one.
func Counted(minute, now time.Time, window time.Duration) bool {
	return !minute.Before(Minute(now.Add(-window)))
}

// CountsExpired reports whether the counts of minute are older than a
// retention cutoff: the whole minute ended before it.
func CountsExpired(minute, cutoff time.Time) bool {
	return minute.Before(Minute(cutoff))
}

// RunCountKey is what settled runs are counted by.
type RunCountKey struct {
	Minute           time.Time
	Workflow, Tenant string
	Status           store.RunStatus
}

// SettledCount is the key under which a run that just settled is counted.
func SettledCount(rec *store.Run) RunCountKey {
	return RunCountKey{Minute: Minute(rec.FinishedAt), Workflow: rec.Workflow, Tenant: rec.Tenant, Status: rec.Status}
}

// SortStats puts stats in the order both stores return them: queues by
// workflow, version and tenant; run counts by workflow, tenant, in flight
// before settled, version and status.
func SortStats(st *store.Stats) {
	slices.SortFunc(st.Queues, func(a, b store.QueueStats) int {
		return cmp.Or(cmp.Compare(a.Workflow, b.Workflow), cmp.Compare(a.Version, b.Version), cmp.Compare(a.Tenant, b.Tenant))
	})
	slices.SortFunc(st.Runs, func(a, b store.RunCount) int {
		return cmp.Or(cmp.Compare(a.Workflow, b.Workflow), cmp.Compare(a.Tenant, b.Tenant),
			compareBool(a.Settled, b.Settled), cmp.Compare(a.Version, b.Version), cmp.Compare(a.Status, b.Status))
	})
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
