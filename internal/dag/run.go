package dag

import (
	"fmt"
	"time"

	"github.com/effectivelabs/durable/store"
)

// Run is one run loaded for a transition: its record, its compiled shape and
// its tasks (indexed like the shape's steps, the on-failure task at index
// Shape.Len() once it exists). Transitions change it in place and record what
// changed, so that a store persists exactly that, in one atomic unit.
//
// The rules (see docs/semantics.md):
//   - a task is ready when every parent is COMPLETED or SKIPPED; if none of
//     them COMPLETED it is SKIPPED too (the cascade), otherwise it runs (a
//     sleep step sleeps) unless its own skip conditions fire at claim time;
//   - a permanent failure fails the run at once: PENDING, QUEUED and SLEEPING
//     tasks are CANCELLED, RUNNING ones are left to finish (their workers
//     learn through heartbeats), and the on-failure task is enqueued;
//   - the run is COMPLETED when every step is terminal and none failed, and
//     settles (FinishedAt) once every task, on-failure included, is terminal.
type Run struct {
	Rec   store.Run
	Shape *Compiled
	Tasks []store.Task

	// RunChanged is set when Rec changed.
	RunChanged bool
	// Dirty marks tasks that changed, by index.
	Dirty []bool
	// OnFailureCreated is set when the on-failure task was created (it must
	// be inserted rather than updated).
	OnFailureCreated bool
	// Events are the events to append, in order.
	Events []store.Event
	// Enqueued lists tasks that became ready and need a ready-queue entry.
	Enqueued []int
	// Dequeued lists tasks whose ready-queue entry must be removed.
	Dequeued []int
	// TimerSet is set when a timer was created or moved earlier.
	TimerSet bool
	// Settled is set when this transition settled the run.
	Settled bool
}

// Timestamp truncates t to the microsecond precision of stored timestamps,
// so that every store computes the same times.
func Timestamp(t time.Time) time.Time { return t.Truncate(time.Microsecond) }

// Load wraps a stored run for a transition. tasks must hold every task of
// the run in shape order (on-failure last, if created).
func Load(rec store.Run, shape *Compiled, tasks []store.Task) (*Run, error) {
	if n := len(tasks); n != shape.Len() && n != shape.Len()+1 {
		return nil, fmt.Errorf("dag: run %s has %d tasks, shape has %d steps", rec.ID, n, shape.Len())
	}
	for i := range tasks {
		if tasks[i].Name != shape.Name(i) {
			return nil, fmt.Errorf("dag: run %s: task %d is %q, shape says %q", rec.ID, i, tasks[i].Name, shape.Name(i))
		}
	}
	return &Run{Rec: rec, Shape: shape, Tasks: tasks, Dirty: make([]bool, shape.Len()+1)}, nil
}

// Start creates the tasks of a new run and makes its roots ready (or asleep).
func Start(rec store.Run, shape *Compiled, now time.Time) *Run {
	rec.Status = store.RunRunning
	rec.CreatedAt = now
	tasks := make([]store.Task, shape.Len())
	for i := range tasks {
		tasks[i] = store.Task{RunID: rec.ID, Name: shape.Name(i), Kind: shape.Kind(i), State: store.TaskPending}
	}
	r := &Run{Rec: rec, Shape: shape, Tasks: tasks, Dirty: make([]bool, shape.Len()+1), RunChanged: true}
	for i := range tasks {
		r.Dirty[i] = true
		if len(shape.Parents(i)) == 0 {
			r.becomeReady(i, now)
		}
	}
	return r
}

// Claim makes a QUEUED task RUNNING under a new claim.
func (r *Run) Claim(i int, token int64, worker string, now time.Time) bool {
	t := &r.Tasks[i]
	if t.State != store.TaskQueued || !t.DueAt.IsZero() {
		return false
	}
	t.State = store.TaskRunning
	t.Attempt++
	t.Token = token
	t.Worker = worker
	t.StartedAt = now
	t.HeartbeatAt = time.Time{}
	t.FinishedAt = time.Time{}
	r.touch(i)
	r.event(i, store.EventStarted, now, "", time.Time{})
	return true
}

// Current reports whether the claim token of task i is current and the
// task's run still wants it to run: the test a heartbeat applies.
func (r *Run) Current(i int, token int64) bool {
	t := &r.Tasks[i]
	if t.State != store.TaskRunning || t.Token != token {
		return false
	}
	return r.Rec.Status == store.RunRunning || i == r.Shape.Len()
}

// Finish applies the outcome of a claim of task i.
func (r *Run) Finish(i int, o *store.Outcome, now time.Time) store.FinishStatus {
	t := &r.Tasks[i]
	if t.Token != o.Task.Token || t.Token == 0 {
		return store.FinishStale
	}
	if t.State != store.TaskRunning {
		return store.FinishDuplicate
	}
	switch o.Kind {
	case store.OutcomeComplete:
		r.complete(i, o.Output, now)
	case store.OutcomeFail:
		r.fail(i, o.Error, o.Terminal, o.Rand, now)
	case store.OutcomeSkip:
		if !r.running(i) {
			r.cancel(i, now, "run is "+string(r.Rec.Status))
		} else {
			r.finish(i, store.TaskSkipped, now)
			r.event(i, store.EventSkipped, now, o.Reason, time.Time{})
			r.resolveChildren(i, now)
		}
	case store.OutcomeRelease:
		t.Attempt--
		t.Worker = ""
		if !r.running(i) {
			r.cancel(i, now, "run is "+string(r.Rec.Status))
		} else {
			r.enqueue(i, now, "released by its worker")
		}
	default:
		return store.FinishStale
	}
	r.checkRun(now)
	return store.FinishApplied
}

// Wake fires the timer of task i if it is due: a sleeping task completes, a
// task waiting out a retry backoff becomes ready.
func (r *Run) Wake(i int, now time.Time) bool {
	t := &r.Tasks[i]
	if t.DueAt.IsZero() || t.DueAt.After(now) {
		return false
	}
	switch t.State {
	case store.TaskSleeping:
		t.DueAt = time.Time{}
		r.finish(i, store.TaskCompleted, now)
		r.event(i, store.EventWoken, now, "", time.Time{})
		r.resolveChildren(i, now)
	case store.TaskQueued:
		r.enqueue(i, now, "")
	default:
		return false
	}
	r.checkRun(now)
	return true
}

// Rescue treats the RUNNING task i, whose worker stopped heartbeating, as a
// failed attempt.
func (r *Run) Rescue(i int, msg string, rand float64, now time.Time) bool {
	t := &r.Tasks[i]
	if t.State != store.TaskRunning {
		return false
	}
	t.Token = 0 // the old claim must never be accepted again
	r.fail(i, msg, false, rand, now)
	r.checkRun(now)
	return true
}

func (r *Run) running(i int) bool {
	return r.Rec.Status == store.RunRunning || i == r.Shape.Len()
}

func (r *Run) complete(i int, output []byte, now time.Time) {
	t := &r.Tasks[i]
	t.Output = output
	t.Error = ""
	r.finish(i, store.TaskCompleted, now)
	r.event(i, store.EventCompleted, now, "", time.Time{})
	if r.Rec.Status == store.RunRunning && i < r.Shape.Len() {
		r.resolveChildren(i, now)
	}
}

func (r *Run) fail(i int, msg string, terminal bool, rand float64, now time.Time) {
	t := &r.Tasks[i]
	t.Error = msg
	t.Worker = ""
	if !r.running(i) {
		r.cancel(i, now, "run is "+string(r.Rec.Status)+"; step error: "+msg)
		return
	}
	policy := r.Shape.Retry(i)
	if !terminal && t.Attempt < policy.MaxAttempts {
		delay := RetryDelay(policy, t.Attempt, rand)
		due := Timestamp(now.Add(delay))
		r.touch(i)
		t.State = store.TaskQueued
		r.event(i, store.EventRetrying, now, msg, due)
		if delay <= 0 {
			r.enqueue(i, now, "")
		} else {
			t.DueAt = due
			r.TimerSet = true
		}
		return
	}
	r.finish(i, store.TaskFailed, now)
	r.event(i, store.EventFailed, now, msg, time.Time{})
	if i < r.Shape.Len() {
		r.failRun(i, msg, now)
	}
}

func (r *Run) failRun(failed int, msg string, now time.Time) {
	r.Rec.Status = store.RunFailed
	r.Rec.FailedStep = r.Shape.Name(failed)
	r.Rec.Error = msg
	r.RunChanged = true
	reason := fmt.Sprintf("run failed: step %q failed", r.Rec.FailedStep)
	for j := range r.Shape.Len() {
		switch r.Tasks[j].State {
		case store.TaskPending, store.TaskQueued, store.TaskSleeping:
			r.cancel(j, now, reason)
		}
	}
	if r.Shape.Shape.OnFailure != nil && len(r.Tasks) == r.Shape.Len() {
		n := r.Shape.Len()
		r.Tasks = append(r.Tasks, store.Task{
			RunID: r.Rec.ID, Name: store.OnFailureTask, Kind: store.KindOnFailure, State: store.TaskPending,
		})
		r.OnFailureCreated = true
		r.touch(n)
		r.enqueue(n, now, "")
	}
}

func (r *Run) cancel(i int, now time.Time, reason string) {
	t := &r.Tasks[i]
	if t.State == store.TaskQueued && t.DueAt.IsZero() {
		r.Dequeued = append(r.Dequeued, i)
	}
	t.DueAt = time.Time{}
	t.Worker = ""
	r.finish(i, store.TaskCancelled, now)
	r.event(i, store.EventCancelled, now, reason, time.Time{})
}

// resolveChildren makes ready the children of task i whose parents are all
// resolved. A child none of whose parents completed is skipped in turn.
func (r *Run) resolveChildren(i int, now time.Time) {
	for _, c := range r.Shape.Children(i) {
		if r.Tasks[c].State != store.TaskPending {
			continue
		}
		completed, resolved := false, true
		for _, p := range r.Shape.Parents(c) {
			switch r.Tasks[p].State {
			case store.TaskCompleted:
				completed = true
			case store.TaskSkipped:
			default:
				resolved = false
			}
		}
		if !resolved {
			continue
		}
		if !completed {
			r.finish(c, store.TaskSkipped, now)
			r.event(c, store.EventSkipped, now, "all parents skipped", time.Time{})
			r.resolveChildren(c, now)
			continue
		}
		r.becomeReady(c, now)
	}
}

func (r *Run) becomeReady(i int, now time.Time) {
	if r.Shape.Kind(i) == store.KindSleep {
		t := &r.Tasks[i]
		t.State = store.TaskSleeping
		t.DueAt = Timestamp(now.Add(r.Shape.Shape.Steps[i].Sleep))
		t.StartedAt = now
		r.touch(i)
		r.TimerSet = true
		r.event(i, store.EventSleeping, now, "", t.DueAt)
		return
	}
	r.enqueue(i, now, "")
}

func (r *Run) enqueue(i int, now time.Time, detail string) {
	t := &r.Tasks[i]
	t.State = store.TaskQueued
	t.DueAt = time.Time{}
	r.touch(i)
	r.Enqueued = append(r.Enqueued, i)
	r.event(i, store.EventQueued, now, detail, time.Time{})
}

func (r *Run) finish(i int, state store.TaskState, now time.Time) {
	t := &r.Tasks[i]
	t.State = state
	t.FinishedAt = now
	r.touch(i)
}

// checkRun completes the run when every step is terminal, and settles it
// once every task is.
func (r *Run) checkRun(now time.Time) {
	if r.Rec.Settled() {
		return
	}
	for i := range r.Tasks {
		if !r.Tasks[i].State.Terminal() {
			return
		}
	}
	if r.Rec.Status == store.RunRunning {
		r.Rec.Status = store.RunCompleted
	}
	r.Rec.FinishedAt = now
	r.RunChanged = true
	r.Settled = true
}

func (r *Run) touch(i int) { r.Dirty[i] = true }

func (r *Run) event(i int, typ store.EventType, now time.Time, detail string, due time.Time) {
	r.Events = append(r.Events, store.Event{
		RunID: r.Rec.ID, Step: r.Shape.Name(i), Type: typ, Attempt: r.Tasks[i].Attempt,
		At: now, Detail: detail, DueAt: due,
	})
}
