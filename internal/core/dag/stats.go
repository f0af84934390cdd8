package dag

import (
	"cmp"
	"slices"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// Minute is the minute t falls in: settled runs are counted by the minute
// they settled in (durabletype.Stats). Minutes are whole minutes since the Unix
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

// Gauge is one of the task counts of a queue's stats (durabletype.QueueStats).
type Gauge int

const (
	// Uncounted: the task is in none of the counts: PENDING (a parent has
	// not finished) or terminal.
	Uncounted Gauge = iota
	// GaugeReady counts in durabletype.QueueStats.Ready.
	GaugeReady
	// GaugeWaiting counts in durabletype.QueueStats.Waiting.
	GaugeWaiting
	// GaugeRunning counts in durabletype.QueueStats.Running.
	GaugeRunning
)

// GaugeOf says which count of its queue's stats (durabletype.QueueStats) a task
// is in; parked reports whether its store holds it parked behind its
// concurrency key (flow.go: QUEUED, but in the key's FIFO rather
// than the ready queue). A RUNNING task is running. A task waits when it
// has a due time (a sleep, a retry's backoff, a delayed start, the next
// window of its rate limit, a wait's timeout), is parked, or is WAITING
// (for an event, a signal, a child run or a map step's items). A claimable
// task (Claimable) is ready, whether or not the rate-limit window that
// admitted it has ended (RateExpired: it stays in the ready queue until
// its timer requeues it). Both stores count by it: memstore calls it,
// pgstore's stats statements are its compiled form, checked against it by
// pgstore's TestStatsMatchCore.
func GaugeOf(t *store.Task, parked bool) Gauge {
	switch {
	case t.State == durabletype.TaskRunning:
		return GaugeRunning
	case !t.DueAt.IsZero() || t.State == durabletype.TaskWaiting || parked:
		return GaugeWaiting
	case Claimable(t):
		return GaugeReady
	}
	return Uncounted
}

// CountTask counts task t in the stats q of its queue (GaugeOf); readyAt
// is when it became ready, which sets q.OldestReady if it is the oldest
// ready task.
func CountTask(q *durabletype.QueueStats, t *store.Task, parked bool, readyAt time.Time) {
	switch GaugeOf(t, parked) {
	case GaugeReady:
		q.Ready++
		if q.OldestReady.IsZero() || readyAt.Before(q.OldestReady) {
			q.OldestReady = readyAt
		}
	case GaugeWaiting:
		q.Waiting++
	case GaugeRunning:
		q.Running++
	}
}

// RunCountKey is what settled runs are counted by.
type RunCountKey struct {
	Minute           time.Time
	Workflow, Tenant string
	Status           durabletype.RunStatus
}

// SettledCount is the key under which a run that just settled is counted.
func SettledCount(rec *store.Run) RunCountKey {
	return RunCountKey{Minute: Minute(rec.FinishedAt), Workflow: rec.Workflow, Tenant: rec.Tenant, Status: rec.Status}
}

// SortStats puts stats in the order both stores return them: queues by
// workflow, version and tenant; run counts by workflow, tenant, in flight
// before settled, version and status.
func SortStats(st *durabletype.Stats) {
	slices.SortFunc(st.Queues, func(a, b durabletype.QueueStats) int {
		return cmp.Or(cmp.Compare(a.Workflow, b.Workflow), cmp.Compare(a.Version, b.Version), cmp.Compare(a.Tenant, b.Tenant))
	})
	slices.SortFunc(st.Runs, func(a, b durabletype.RunCount) int {
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
