package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
)

// WaitLister is implemented by stores that can say, in one read, what the
// steps of many runs wait for: what a listing of runs shows beside each
// run in flight, without reading every task of every run (outputs and a
// map step's items included). Both stores of the module implement it.
type WaitLister interface {
	// ListWaits returns, by run, the tasks of the runs that wait: WAITING
	// (for an event, a signal, a child run or a map step's items),
	// SLEEPING, or QUEUED with a due time (a retry's backoff or a delayed
	// start), in the order of the run's shape. The items of map steps are
	// not listed (their map step counts them), nor outputs. A run that is
	// not found, or waits for nothing, has no entry.
	ListWaits(ctx context.Context, p *ListWaitsParams) (map[uuid.UUID][]WaitingTask, error)
}

// ListWaitsParams are the parameters of WaitLister.ListWaits.
type ListWaitsParams struct {
	// RunIDs are the runs whose waits are listed.
	RunIDs []uuid.UUID
	// Tenant, when set, restricts the call to that tenant's runs.
	Tenant string
}

// WaitingTask is a task that waits, as WaitLister.ListWaits lists it: the
// fields of its Task that say what for and until when.
type WaitingTask struct {
	Name  string
	Kind  durabletype.TaskKind
	State durabletype.TaskState
	// Attempt is the number of the latest attempt (0 before the first).
	Attempt int
	// DueAt is when a SLEEPING task wakes, or when a QUEUED one becomes
	// ready (a backoff or a delayed start ends); zero otherwise.
	DueAt time.Time
	// WaitKey is what a KindEvent task waits for (Task.WaitKey).
	WaitKey string
	// Child is the child run a KindChild task waits for.
	Child uuid.UUID
	// Items and Left count a map task's items and those not COMPLETED.
	Items, Left int
}

// Waits reports whether a task in state state, with due time due, is one
// that ListWaits lists (items aside).
func Waits(state durabletype.TaskState, due time.Time) bool {
	return state == durabletype.TaskWaiting || state == durabletype.TaskSleeping || (state == durabletype.TaskQueued && !due.IsZero())
}
