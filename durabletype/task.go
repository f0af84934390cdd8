package durabletype

// TaskState is the state of one task (one step of one run).
//
// A task waiting out a retry backoff is QUEUED with a DueAt in the future: it
// is durable state, and becomes claimable when its timer fires.
type TaskState string

// Task states; COMPLETED, FAILED, SKIPPED and CANCELLED are final. A
// WAITING task waits for an event, a signal, a child run or the items of
// a map step: it holds no worker and no claim, only its row.
const (
	TaskPending   TaskState = "PENDING"
	TaskQueued    TaskState = "QUEUED"
	TaskRunning   TaskState = "RUNNING"
	TaskSleeping  TaskState = "SLEEPING"
	TaskWaiting   TaskState = "WAITING"
	TaskCompleted TaskState = "COMPLETED"
	TaskFailed    TaskState = "FAILED"
	TaskSkipped   TaskState = "SKIPPED"
	TaskCancelled TaskState = "CANCELLED"
)

// Terminal reports whether no further transition can leave the state.
func (s TaskState) Terminal() bool {
	switch s {
	case TaskCompleted, TaskFailed, TaskSkipped, TaskCancelled:
		return true
	}
	return false
}

// TaskKind tells what a task does when it becomes ready.
type TaskKind string

const (
	// KindStep runs user code.
	KindStep TaskKind = "step"
	// KindSleep waits durably for its duration, then completes.
	KindSleep TaskKind = "sleep"
	// KindOnFailure runs the workflow's on-failure handler after the run failed.
	KindOnFailure TaskKind = "on_failure"
	// KindEvent computes the key of the event it waits for (or names its
	// signal), then waits for it (StepSpec.Wait).
	KindEvent TaskKind = "event"
	// KindChild computes the input of a child run, starts it and waits for
	// it (StepSpec.Child).
	KindChild TaskKind = "child"
	// KindMap splits a parent's list into items, one task each (KindItem),
	// and waits for them (StepSpec.Map).
	KindMap TaskKind = "map"
	// KindItem runs a map step's function on one item.
	KindItem TaskKind = "item"
	// KindFunc runs the body of a durable function (StepSpec.Func): plain
	// Go code whose calls (steps, sleeps, waits, child runs) are recorded
	// as they are made, each as a record of its own (an item of the body
	// task, named by dag.RecordName). The body runs again from the start
	// after every wait, the calls it made already answering from their
	// records.
	KindFunc TaskKind = "func"
)

// TaskKinds lists every task kind, in the order they were added.
var TaskKinds = []TaskKind{KindStep, KindSleep, KindOnFailure, KindEvent, KindChild, KindMap, KindItem, KindFunc}

// OnFailureTask is the task name of a run's on-failure handler. Step names
// cannot contain '@', so it never collides with a step.
const OnFailureTask = "@on_failure"
