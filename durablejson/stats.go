package durablejson

import (
	"cmp"
	"slices"
	"time"

	"github.com/effectivelabs/durable/durabletype"
)

// Stats is the document of GET /api/v1/stats and "durable stats --json":
// the queues by workflow, version and tenant, and the runs in flight and
// settled within the window, by status.
type Stats struct {
	// At is when the stats were read: ages are taken at it.
	At time.Time `json:"at"`
	// Tenant is the tenant counted, "" for every tenant.
	Tenant string `json:"tenant"`
	// Window is how far back settled runs are counted, as a Go duration
	// ("1h0m0s"); WindowSeconds is the same in seconds.
	Window        string       `json:"window"`
	WindowSeconds float64      `json:"window_s"`
	Queues        []QueueStats `json:"queues"`
	Runs          []RunCount   `json:"runs"`
}

// QueueStats are the tasks of one workflow version and tenant.
type QueueStats struct {
	Workflow string `json:"workflow"`
	// Version is the version of the runs the steps belong to.
	Version string `json:"version"`
	Tenant  string `json:"tenant"`
	Ready   int    `json:"ready"`
	Waiting int    `json:"waiting"`
	Running int    `json:"running"`
	// OldestReady is when the oldest ready task became ready, and
	// OldestReadyAge how long before At that was, in seconds; both null
	// when no task is ready.
	OldestReady    *time.Time `json:"oldest_ready"`
	OldestReadyAge *float64   `json:"oldest_ready_age_s"`
}

// RunCount counts runs of one workflow, version, tenant and status.
type RunCount struct {
	Workflow string `json:"workflow"`
	// Version is the version the runs in flight are pinned to; absent
	// for counts of settled runs, which count by workflow only, and for
	// runs started before versions.
	Version string                `json:"version,omitempty"`
	Tenant  string                `json:"tenant"`
	Status  durabletype.RunStatus `json:"status"`
	// Settled is false for runs in flight.
	Settled bool `json:"settled"`
	Count   int  `json:"count"`
}

// NewStats builds the document of st, read at now for tenant ("" for
// every one) with window: the queues ordered by workflow, version and
// tenant, the runs by workflow and tenant, those in flight before the
// settled ones, then by status (in the order of durabletype.RunStatuses)
// and version.
func NewStats(st *durabletype.Stats, now time.Time, tenant string, window time.Duration) *Stats {
	out := &Stats{
		At: now.UTC(), Tenant: tenant, Window: window.String(), WindowSeconds: window.Seconds(),
		Queues: make([]QueueStats, len(st.Queues)), Runs: make([]RunCount, len(st.Runs)),
	}
	for i, q := range st.Queues {
		out.Queues[i] = QueueStats{
			Workflow: q.Workflow, Version: q.Version, Tenant: q.Tenant, Ready: q.Ready, Waiting: q.Waiting, Running: q.Running,
			OldestReady: Time(q.OldestReady),
		}
		if !q.OldestReady.IsZero() {
			secs := max(now.Sub(q.OldestReady), 0).Seconds()
			out.Queues[i].OldestReadyAge = &secs
		}
	}
	slices.SortFunc(out.Queues, func(a, b QueueStats) int {
		return cmp.Or(cmp.Compare(a.Workflow, b.Workflow), cmp.Compare(a.Version, b.Version), cmp.Compare(a.Tenant, b.Tenant))
	})
	for i, c := range st.Runs {
		out.Runs[i] = RunCount{Workflow: c.Workflow, Version: c.Version, Tenant: c.Tenant, Status: c.Status, Settled: c.Settled, Count: c.Count}
	}
	rank := func(s durabletype.RunStatus) int { return slices.Index(durabletype.RunStatuses, s) }
	settled := func(c RunCount) int {
		if c.Settled {
			return 1
		}
		return 0
	}
	slices.SortFunc(out.Runs, func(a, b RunCount) int {
		return cmp.Or(cmp.Compare(a.Workflow, b.Workflow), cmp.Compare(a.Tenant, b.Tenant),
			cmp.Compare(settled(a), settled(b)), cmp.Compare(rank(a.Status), rank(b.Status)), cmp.Compare(a.Version, b.Version))
	})
	return out
}

// Time is t in UTC, nil when zero: how the documents write a time that
// may not have happened (null).
func Time(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
