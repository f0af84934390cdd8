package dag

import (
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// Effects is what one transition of a run did: everything a store must
// persist for it, in one atomic unit, in the spirit of etcd raft's Ready. It
// names what changed; the run (Run.Rec, Run.Tasks) holds the new values. A
// store persists effects and decides nothing.
type Effects struct {
	// Created is set when the run is new: its record and every task are
	// inserted rather than updated.
	Created bool
	// RunChanged is set when the run's record changed (status, failure,
	// settlement).
	RunChanged bool
	// Tasks lists the tasks whose records changed, by index, ascending.
	Tasks []int
	// NewTasks lists the tasks that did not exist before (the on-failure
	// task, and every task of a created run), ascending: a subset of Tasks
	// to insert rather than update.
	NewTasks []int
	// Events are the events to append, in order; their IDs are the
	// store's to assign.
	Events []durabletype.Event
	// Enqueued lists the tasks that became claimable, in the order they
	// must be placed in the fair queue.
	Enqueued []int
	// Dequeued lists the tasks that were claimable and no longer are: their
	// queue entries must go.
	Dequeued []int
	// Timer is set when a timer was created or moved: a sleep began or a
	// retry backoff started.
	Timer bool
	// Settled is set when the transition settled the run.
	Settled bool
	// Cancelled is set when the transition cancelled the run: engines
	// running its steps are to be told.
	Cancelled bool
	// Waits lists the tasks that began waiting for an event or a signal:
	// the store looks among the messages it keeps for the first each may
	// receive at once (Run.WaitQuery) and delivers it (Run.Deliver) in the
	// same atomic unit.
	Waits []int
	// Spawned are the child runs to create, in order, in the same atomic
	// unit (dag.Commit creates them as CreateRuns would).
	Spawned []store.NewRun
	// Outbox holds the messages for other runs (Message), to write in the
	// same atomic unit and apply to their runs afterwards.
	Outbox []Message
	// Deleted lists the items whose records go: a map step fanned out
	// again to fewer items.
	Deleted []int
	// Reshaped is set when the run moved to another version (Run.Upgrade):
	// its record's shape and version changed, its steps kept their
	// indexes and new ones follow them, and the on-failure task, if it
	// exists, is now at index Shape.Len(). The queue entries of its tasks
	// take the new version.
	Reshaped bool
	// Refused lists the waiting tasks that refused the payload delivered
	// to them (Run.Deliver): they keep waiting. The refusal is in Events
	// too; this tells the caller that sent the payload.
	Refused []durabletype.Refusal
}

// Empty reports whether the effects change nothing.
func (fx *Effects) Empty() bool {
	return !fx.Created && !fx.RunChanged && len(fx.Tasks) == 0 && len(fx.Events) == 0 &&
		len(fx.Enqueued) == 0 && len(fx.Dequeued) == 0 && !fx.Timer && !fx.Settled && !fx.Cancelled &&
		len(fx.Waits) == 0 && len(fx.Spawned) == 0 && len(fx.Outbox) == 0 && len(fx.Deleted) == 0 && !fx.Reshaped
}

// Merge folds the effects of a later transition of the same run into fx,
// so that a store applying several transitions to a run in one call
// persists their net result: a task enqueued by one and dequeued by a later
// one never gets a queue entry, and a task dequeued by one and enqueued
// again by a later one has its old entry replaced.
func (fx *Effects) Merge(next Effects) {
	fx.Created = fx.Created || next.Created
	fx.RunChanged = fx.RunChanged || next.RunChanged
	fx.Tasks = union(fx.Tasks, next.Tasks)
	fx.NewTasks = union(fx.NewTasks, next.NewTasks)
	fx.Events = append(fx.Events, next.Events...)
	for _, i := range next.Dequeued {
		if k := slices.Index(fx.Enqueued, i); k >= 0 {
			fx.Enqueued = slices.Delete(fx.Enqueued, k, k+1)
		} else if !slices.Contains(fx.Dequeued, i) {
			fx.Dequeued = append(fx.Dequeued, i)
		}
	}
	fx.Enqueued = append(fx.Enqueued, next.Enqueued...)
	fx.Timer = fx.Timer || next.Timer
	fx.Settled = fx.Settled || next.Settled
	fx.Cancelled = fx.Cancelled || next.Cancelled
	fx.Waits = append(fx.Waits, next.Waits...)
	fx.Spawned = append(fx.Spawned, next.Spawned...)
	fx.Outbox = append(fx.Outbox, next.Outbox...)
	fx.Deleted = union(fx.Deleted, next.Deleted)
	fx.Reshaped = fx.Reshaped || next.Reshaped
	fx.Refused = append(fx.Refused, next.Refused...)
}

// union merges two ascending index lists.
func union(a, b []int) []int {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return slices.Clone(b)
	}
	out := make([]int, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	return out
}

// Change is what one store call must persist, atomically: the runs its
// transitions touched, each with their merged effects, and the tasks they
// enqueued across runs, in the order fair-queue ids are assigned. Both stores
// build one per call, apply the core's transitions through it, and persist
// it; they differ only in how they write.
type Change struct {
	// Now is the time of the call's transitions.
	Now time.Time
	// Runs are the runs touched, in the order they were first touched.
	Runs []*Run
	// Effects holds the merged effects of each run in Runs.
	Effects map[*Run]*Effects
	// Enqueued lists the tasks to place in the fair queue, across runs, in
	// the order the transitions enqueued them, net of later dequeues.
	Enqueued []TaskAt
	// Admitted is what admission decided (Commit), nil when the change
	// involves no keyed task.
	Admitted *Admitted

	// left are the runs the call leaves alone (Leave).
	left map[uuid.UUID]leftRun
}

// TaskAt names task I of run R.
type TaskAt struct {
	R *Run
	I int
}

// NewChange returns an empty change for transitions at now.
func NewChange(now time.Time) *Change {
	return &Change{Now: now, Effects: make(map[*Run]*Effects)}
}

// Add records the effects of a transition of r. The effects of a run's
// first transition in the call are kept as they are (its lists are the
// transition's, which hands them over); later ones are merged into them.
func (c *Change) Add(r *Run, fx Effects) {
	acc := c.Effects[r]
	if acc == nil {
		c.Effects[r] = &fx
		c.Runs = append(c.Runs, r)
		c.Enqueued = slices.Grow(c.Enqueued, len(fx.Enqueued))
		for _, i := range fx.Enqueued {
			c.Enqueued = append(c.Enqueued, TaskAt{r, i})
		}
		return
	}
	for _, i := range fx.Dequeued {
		if k := slices.Index(c.Enqueued, TaskAt{r, i}); k >= 0 {
			c.Enqueued = slices.Delete(c.Enqueued, k, k+1)
		}
	}
	for _, i := range fx.Enqueued {
		c.Enqueued = append(c.Enqueued, TaskAt{r, i})
	}
	acc.Merge(fx)
}

// Timer reports whether any transition created or moved a timer.
func (c *Change) Timer() bool {
	for _, fx := range c.Effects {
		if fx.Timer {
			return true
		}
	}
	return false
}

// Cancelled returns the runs the call cancelled, in order.
func (c *Change) Cancelled() []*Run {
	var out []*Run
	for _, r := range c.Runs {
		if c.Effects[r].Cancelled {
			out = append(out, r)
		}
	}
	return out
}

// Settled returns the runs the call settled, in order.
func (c *Change) Settled() []*Run {
	var out []*Run
	for _, r := range c.Runs {
		if c.Effects[r].Settled {
			out = append(out, r)
		}
	}
	return out
}

// AppendSettled appends to dst the settlement (Run.Settlement) of each run
// the call settled, in order, and returns the extended slice: dst itself
// when none did.
func (c *Change) AppendSettled(dst []store.SettledRun) []store.SettledRun {
	for _, r := range c.Runs {
		if c.Effects[r].Settled {
			dst = append(dst, r.Settlement())
		}
	}
	return dst
}
