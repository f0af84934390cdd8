package dag

import (
	"bytes"
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// Run is one run loaded for a transition: its record, its compiled shape and
// its tasks (indexed like the shape's steps, the on-failure task at index
// Shape.Len() once it exists). A transition changes the run in place and
// returns its Effects, which is all a store needs to persist.
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
//
// Every text a transition records (errors, reasons) goes through Text, so
// that both stores record the same valid, bounded UTF-8.
type Run struct {
	Rec   store.Run
	Shape *Compiled
	Tasks []store.Task
	// LoadItems, set by the store, returns every item of map step m of r
	// as stored. A transition that needs all of a map step's items (to
	// cancel them, to fan out again after a replay) calls it once per
	// step.
	LoadItems func(r *Run, m int) ([]store.Task, error)

	// items are the items of map steps loaded or created during the call;
	// nil until the first (most runs have none).
	items *loadedItems

	fx    Effects // of the transition in progress
	dirty []bool
}

// loadedItems holds the items of a run's map steps that a call loaded
// (AddItems, LoadItems) or created, in that order: index ItemBase+j is
// tasks[j].
type loadedItems struct {
	tasks []store.Task
	step  []int          // the map step of each
	at    map[itemID]int // by step and number
	full  map[int]bool   // map steps whose items are all loaded
	err   error          // of LoadItems
	dirty []bool
}

// Timestamp truncates t to the microsecond precision of stored timestamps,
// so that every store computes the same times.
func Timestamp(t time.Time) time.Time { return t.Truncate(time.Microsecond) }

// Load wraps a stored run for transitions. tasks must hold every task of
// the run in shape order (on-failure last, if created).
func Load(rec store.Run, shape *Compiled, tasks []store.Task) (*Run, error) {
	if n := len(tasks); n != shape.Len() && n != shape.Len()+1 {
		return nil, fmt.Errorf("dag: run %s has %d tasks, shape has %d steps", rec.ID, n, shape.Len())
	}
	for i := range tasks {
		if tasks[i].Name != shape.Name(i) {
			return nil, fmt.Errorf("dag: run %s: task %d is %s, shape says %s", rec.ID, i, Quote(tasks[i].Name), Quote(shape.Name(i)))
		}
	}
	return &Run{Rec: rec, Shape: shape, Tasks: tasks}, nil
}

// Start creates the tasks of a new run and makes its roots ready (or
// asleep). With startAt after now the roots wait until then instead, as
// timers (QUEUED with a due time, like a retry backoff), and become ready
// when Wake fires them.
func Start(rec store.Run, shape *Compiled, now, startAt time.Time) (*Run, Effects) {
	rec.Status = durabletype.RunRunning
	rec.CreatedAt = now
	rec.Deadline = Timestamp(rec.Deadline)
	rec.FinishedAt = time.Time{}
	rec.FailedStep, rec.Error = "", ""
	tasks := make([]store.Task, shape.Len())
	for i := range tasks {
		tasks[i] = store.Task{RunID: rec.ID, Name: shape.Name(i), Kind: shape.Kind(i), State: durabletype.TaskPending}
	}
	r := &Run{Rec: rec, Shape: shape, Tasks: tasks}
	r.begin()
	r.fx.Created, r.fx.RunChanged = true, true
	// A deadline is a timer: the leader must learn of it now, not at its
	// next wake-up, which may be later than the deadline.
	r.fx.Timer = !rec.Deadline.IsZero()
	for i := range tasks {
		r.touch(i)
		r.fx.NewTasks = append(r.fx.NewTasks, i)
		if len(shape.Parents(i)) != 0 {
			continue
		}
		if startAt.After(now) && shape.Kind(i) != durabletype.KindSleep {
			t := &r.Tasks[i]
			t.State = durabletype.TaskQueued
			t.DueAt = Timestamp(startAt)
			r.fx.Timer = true
			r.event(i, durabletype.EventQueued, now, "start delayed", t.DueAt)
			continue
		}
		if startAt.After(now) { // a sleep root sleeps from the start time
			r.becomeReadyAt(i, now, Timestamp(startAt))
			continue
		}
		r.becomeReady(i, now)
	}
	return r, r.end()
}

// Claimable reports whether a task may be claimed: it is QUEUED and not
// waiting out a retry backoff. Stores keep a queue entry for exactly these
// tasks (Effects.Enqueued and Dequeued maintain it), so a claim takes queue
// entries and applies Claim.
func Claimable(t *store.Task) bool {
	return t.State == durabletype.TaskQueued && t.DueAt.IsZero()
}

// Claim makes task i RUNNING under a new claim: the attempt counts up, the
// token and worker are recorded, and a STARTED event is appended.
func (r *Run) Claim(i int, token int64, worker string, now time.Time) (Effects, bool) {
	r.begin()
	t := r.Task(i)
	if !Claimable(t) || token == 0 {
		return r.end(), false
	}
	t.State = durabletype.TaskRunning
	t.Attempt++
	t.Token = token
	t.Worker = worker
	t.StartedAt = now
	t.HeartbeatAt = time.Time{}
	t.FinishedAt = time.Time{}
	t.TimeoutAt = time.Time{}
	if d := r.Shape.Timeout(r.StepOf(i)); d > 0 {
		t.TimeoutAt = Timestamp(now.Add(d))
		r.fx.Timer = true
	}
	r.touch(i)
	r.fx.Dequeued = append(r.fx.Dequeued, i)
	r.event(i, durabletype.EventStarted, now, "", time.Time{})
	return r.end(), true
}

// Current reports whether token is the current claim of task t, in a run
// whose status is status: the test a heartbeat applies, and which decides
// whether the claim's worker should keep running the step. A claim is
// current while its task is RUNNING under that token and the run still
// wants the task: the run is active (durabletype.RunStatus.Active), or the
// task is its on-failure handler, which runs in a failed run.
func Current(t *store.Task, token int64, status durabletype.RunStatus) bool {
	if token == 0 || !Beats(t, token) {
		return false
	}
	return status.Active() || t.Kind == durabletype.KindOnFailure
}

// Beats reports whether a heartbeat of the claim token on task t stamps
// the task's HeartbeatAt (which keeps a rescue away, Dead): the task is
// RUNNING under that claim. A claim its run no longer wants (not Current:
// a sibling of a step that failed the run) is stamped all the same, and
// its worker told the claim is lost. memstore calls it; pgstore's
// heartbeatTasks is its compiled form, checked against it by pgstore's
// TestHeartbeatMatchesCore.
func Beats(t *store.Task, token int64) bool {
	return t.State == durabletype.TaskRunning && t.Token == token
}

// LostToCancel reports whether a claim on task t that is not current was
// lost because its run gave the task up: the run was cancelled, or the task
// was cancelled under its claim (a run past its deadline). Its worker is
// told so (ErrRunCancelled) rather than that its claim was taken over.
// It names the status CANCELLED itself, not a meaning of it: the worker is
// told the reason of that status (TestStatusesAskedByMeaning allows it).
func LostToCancel(t *store.Task, status durabletype.RunStatus) bool {
	return status == durabletype.RunCancelled || t.State == durabletype.TaskCancelled
}

// LostToTimeout reports whether a claim on task t that is not current was
// lost because its attempt ran past its timeout (the task's latest error
// is the timeout's): its worker is told so (ErrStepTimeout).
func LostToTimeout(t *store.Task) bool {
	return strings.HasPrefix(t.Error, ErrTimeoutText)
}

// Current reports whether token is the current claim of task i.
func (r *Run) Current(i int, token int64) bool {
	return Current(r.Task(i), token, r.Rec.Status)
}

// Dead reports whether a RUNNING task has gone deadAfter without a sign of
// life from its claimer: neither the claim nor a heartbeat is that recent.
// Stores may preselect candidates with a cheaper test; Rescue decides.
func Dead(t *store.Task, now time.Time, deadAfter time.Duration) bool {
	if t.State != durabletype.TaskRunning {
		return false
	}
	last := t.StartedAt
	if t.HeartbeatAt.After(last) {
		last = t.HeartbeatAt
	}
	return now.Sub(last) >= deadAfter
}

// Finish applies the outcome of a claim of task i. An outcome whose token
// is not the task's latest claim is stale and changes nothing; one for a
// claim that was already finished is a duplicate.
func (r *Run) Finish(i int, o *store.Outcome, now time.Time) (Effects, store.FinishStatus) {
	r.begin()
	t := r.Task(i)
	if t.Token != o.Task.Token || t.Token == 0 {
		return r.end(), store.FinishStale
	}
	if t.State != durabletype.TaskRunning {
		return r.end(), store.FinishDuplicate
	}
	if o.Kind != store.OutcomeRelease && t.Lost != 0 {
		// The attempt ended (or checkpointed), its worker alive. Written
		// even when nothing else of the task changes (a checkpoint of
		// steps only), so that every store keeps it.
		t.Lost = 0
		r.touch(i)
	}
	if TimedOut(t, now) {
		// The attempt ran past its timeout: whatever its worker reports,
		// it failed, as if the timer had fired first.
		r.timeOut(i, o.Rand, now)
		r.checkRun(now)
		return r.end(), store.FinishApplied
	}
	if !fits(t.Kind, o.Kind) {
		r.fail(i, Text(fmt.Sprintf("durable: a %s task cannot finish with outcome %d", t.Kind, o.Kind)), true, 0, now)
		r.checkRun(now)
		return r.end(), store.FinishApplied
	}
	if err := CheckRecords(o); err != nil {
		r.fail(i, Text(err.Error()), true, 0, now)
		r.checkRun(now)
		return r.end(), store.FinishApplied
	}
	switch o.Kind {
	case store.OutcomeComplete:
		if IsItem(i) {
			if r.wanted(i) {
				r.completeItem(i, o.Output, now)
			} else {
				r.cancel(i, now, "run is "+string(r.Rec.Status))
			}
		} else {
			r.complete(i, o.Output, now)
		}
	case store.OutcomeFail:
		r.fail(i, Text(o.Error), o.Terminal, o.Rand, now)
	case store.OutcomeWait, store.OutcomeSpawn, store.OutcomeFanOut:
		switch {
		case !r.wanted(i):
			r.cancel(i, now, "run is "+string(r.Rec.Status))
		case o.Kind == store.OutcomeWait:
			r.beginWait(i, o.Key, now)
		case o.Kind == store.OutcomeSpawn:
			r.spawn(i, o.Child, now)
		default:
			r.fanOut(i, o.Items, now)
		}
	case store.OutcomeSkip:
		if !r.wanted(i) {
			r.cancel(i, now, "run is "+string(r.Rec.Status))
		} else {
			r.finish(i, durabletype.TaskSkipped, now)
			r.event(i, durabletype.EventSkipped, now, o.Reason, time.Time{})
			r.resolveChildren(i, now)
		}
	case store.OutcomeRelease:
		if o.Delay > 0 && r.wanted(i) {
			// Given back for later: queued at its due time, as a retry is.
			t.Attempt--
			t.Worker = ""
			t.State = durabletype.TaskQueued
			t.TimeoutAt = time.Time{}
			t.DueAt = Timestamp(now.Add(o.Delay))
			r.touch(i)
			r.fx.Timer = true
			r.event(i, durabletype.EventQueued, now, "released by its worker for later", t.DueAt)
			break
		}
		r.giveBack(i, "released by its worker", now)
	case store.OutcomeCheckpoint:
		// The claim goes on. A checkpoint recorded already (its result
		// was lost on the way) is a duplicate: a step's transaction that
		// carries it rolls back.
		if r.record(i, o.Records, now) == 0 && len(o.Records) > 0 && t.State == durabletype.TaskRunning {
			return r.end(), store.FinishDuplicate
		}
	case store.OutcomeSuspend:
		if r.record(i, o.Records, now); r.Err() != nil {
			return r.end(), store.FinishApplied // the store fails the call (Run.Err)
		}
		if t.State == durabletype.TaskRunning {
			r.suspend(i, o.Await, o.AwaitAny, now)
		}
	default:
		return r.end(), store.FinishStale
	}
	r.checkRun(now)
	return r.end(), store.FinishApplied
}

// Result is the FinishResult of outcome o of task i, which Finish applied
// with status st and effects fx: whether a failure will be retried, and
// the run's status if the outcome settled it.
func (r *Run) Result(i int, o *store.Outcome, fx Effects, st store.FinishStatus) store.FinishResult {
	res := store.FinishResult{Status: st}
	if st != store.FinishApplied {
		return res
	}
	res.Retried = o.Kind == store.OutcomeFail && r.Task(i).State == durabletype.TaskQueued
	if fx.Settled {
		res.Settled = r.Rec.Status
	}
	return res
}

// Settlement is what a store reports of run r once a transition settled
// it (Effects.Settled): the run, its workflow and tenant, and the status it
// settled with.
func (r *Run) Settlement() store.SettledRun {
	return store.SettledRun{RunID: r.Rec.ID, Workflow: r.Rec.Workflow, Tenant: r.Rec.Tenant, Status: r.Rec.Status}
}

// ValidOutcome reports whether o is an outcome a store can apply: one of
// the known kinds.
func ValidOutcome(o *store.Outcome) bool {
	switch o.Kind {
	case store.OutcomeComplete, store.OutcomeFail, store.OutcomeSkip, store.OutcomeRelease,
		store.OutcomeWait, store.OutcomeSpawn, store.OutcomeFanOut, store.OutcomeCheckpoint, store.OutcomeSuspend:
		return true
	}
	return false
}

// fits reports whether a task of kind may finish with an outcome of kind
// o: an event step waits, a child step spawns, a map step fans out, the
// others complete; any may fail or be released, and any but an item be
// skipped. A task given an outcome that does not fit fails, without retry.
func fits(kind durabletype.TaskKind, o store.OutcomeKind) bool {
	switch o {
	case store.OutcomeFail, store.OutcomeRelease:
		return true
	case store.OutcomeSkip:
		return kind != durabletype.KindItem && kind != durabletype.KindFunc
	case store.OutcomeCheckpoint, store.OutcomeSuspend:
		return kind == durabletype.KindFunc
	case store.OutcomeWait:
		return kind == durabletype.KindEvent
	case store.OutcomeSpawn:
		return kind == durabletype.KindChild
	case store.OutcomeFanOut:
		return kind == durabletype.KindMap
	}
	return kind == durabletype.KindStep || kind == durabletype.KindOnFailure || kind == durabletype.KindItem || kind == durabletype.KindFunc
}

// TimedOut reports whether task t is past its timeout at now: a RUNNING
// attempt past StepSpec.Timeout, or a claimable task past its
// StepSpec.QueueTimeout.
func TimedOut(t *store.Task, now time.Time) bool {
	if t.TimeoutAt.IsZero() || t.TimeoutAt.After(now) {
		return false
	}
	return t.State == durabletype.TaskRunning || Claimable(t) || (t.State == durabletype.TaskWaiting && t.Kind == durabletype.KindChild)
}

// Timer is when task t's next timer is due: the earlier of its due time
// (sleep, backoff, delayed start) and its timeout; zero when it has none.
func Timer(t *store.Task) time.Time {
	switch {
	case t.DueAt.IsZero():
		return t.TimeoutAt
	case t.TimeoutAt.IsZero() || t.DueAt.Before(t.TimeoutAt):
		return t.DueAt
	}
	return t.TimeoutAt
}

// Wake fires the timers of task i that are due: a sleeping task completes;
// a task waiting out a retry backoff or a delayed start becomes ready; a
// RUNNING attempt past its timeout fails (retried per its policy, its
// claim no longer current, so that its late outcome is stale); a ready
// task past its queue timeout fails the step, without retry. rand is used
// for the retry jitter.
func (r *Run) Wake(i int, rand float64, now time.Time) (Effects, bool) {
	r.begin()
	t := r.Task(i)
	if TimedOut(t, now) {
		if t.State == durabletype.TaskRunning || t.State == durabletype.TaskWaiting {
			r.timeOut(i, rand, now)
		} else {
			msg := fmt.Sprintf("no worker claimed the step within its queue timeout of %s", r.Shape.QueueTimeout(r.StepOf(i)))
			r.fx.Dequeued = append(r.fx.Dequeued, i)
			r.fail(i, Text(msg), true, 0, now)
		}
		r.checkRun(now)
		return r.end(), true
	}
	if t.DueAt.IsZero() || t.DueAt.After(now) {
		return r.end(), false
	}
	if r.Shape.IsFunc(i) && t.State != durabletype.TaskQueued {
		if !r.wakeFunc(i, now) {
			return r.end(), false
		}
		r.checkRun(now)
		return r.end(), true
	}
	switch t.State {
	case durabletype.TaskSleeping:
		t.DueAt = time.Time{}
		r.finish(i, durabletype.TaskCompleted, now)
		r.event(i, durabletype.EventWoken, now, "", time.Time{})
		r.resolveChildren(i, now)
	case durabletype.TaskQueued:
		r.enqueue(i, now, "")
	case durabletype.TaskWaiting:
		if t.Kind != durabletype.KindEvent {
			return r.end(), false
		}
		r.timeOutWait(i, now)
	default:
		return r.end(), false
	}
	r.checkRun(now)
	return r.end(), true
}

// Requeue takes a claimable task i out of the queue and puts it back, as
// when it became ready, with detail in its QUEUED event: a task admitted
// under a rate limit whose window ended before a worker claimed it goes
// through admission again (see internal/core/dag/flow.go). Anything else is left
// alone.
func (r *Run) Requeue(i int, detail string, now time.Time) (Effects, bool) {
	r.begin()
	if !Claimable(r.Task(i)) || !r.wanted(i) {
		return r.end(), false
	}
	r.fx.Dequeued = append(r.fx.Dequeued, i)
	r.enqueue(i, now, detail)
	return r.end(), true
}

// timeOut fails the RUNNING attempt of task i for running past its
// timeout. The claim is cleared, so that its worker learns it (the claim
// is not current) and its outcome is stale.
func (r *Run) timeOut(i int, rand float64, now time.Time) {
	t := r.Task(i)
	msg := fmt.Sprintf("%s: the attempt ran longer than its timeout of %s", ErrTimeoutText, r.Shape.Timeout(r.StepOf(i)))
	r.abandon(i, now, "step timed out")
	t.Token = 0
	r.fail(i, Text(msg), false, rand, now)
}

// ErrTimeoutText starts the error recorded for an attempt that timed out.
const ErrTimeoutText = "step timed out"

// Expire fails a run past its deadline (Rec.Deadline) that has not
// settled: it becomes FAILED with "run deadline exceeded" as its error
// and no failed step; every task not finished is CANCELLED, RUNNING ones
// included (their claims are cleared, so that their workers learn it as
// for a cancel and their late outcomes are stale); the on-failure handler
// runs as for any failure. A run already FAILED (its handler running)
// only has its deadline cleared.
func (r *Run) Expire(now time.Time) (Effects, bool) {
	r.begin()
	if r.Rec.Settled() || r.Rec.Deadline.IsZero() || r.Rec.Deadline.After(now) {
		return r.end(), false
	}
	r.Rec.Deadline = time.Time{}
	r.fx.RunChanged = true
	if !r.Rec.Status.InFlight() { // it failed already: its settlement is under way
		return r.end(), true
	}
	const msg = "run deadline exceeded"
	r.Rec.Status = durabletype.RunFailed
	r.Rec.FailedStep = ""
	r.Rec.Error = msg
	r.fx.Cancelled = true
	for j := range r.Shape.Len() {
		if t := &r.Tasks[j]; !t.State.Terminal() {
			t.Token = 0
			r.cancel(j, now, msg)
		}
	}
	r.startOnFailure(now)
	r.checkRun(now)
	return r.end(), true
}

// Rescue gives back the RUNNING task i if it is Dead: its claimer has not
// been heard of for deadAfter (it died, froze, or lost the store). The
// claim token is cleared, so that the presumed-dead claimer can never
// record an outcome. A lost attempt is the fleet's failure, not the
// step's: it spends no retry (Attempt goes back, as for a release) and
// the task is queued again at once, with a LOST event saying why. Only
// when LostLimit attempts in a row have been lost (a step that kills its
// worker) does the step fail, without retry, with PoisonText.
func (r *Run) Rescue(i int, deadAfter time.Duration, rand float64, now time.Time) (Effects, bool) {
	r.begin()
	t := r.Task(i)
	if !Dead(t, now, deadAfter) {
		return r.end(), false
	}
	msg := fmt.Sprintf("worker %s lost: no heartbeat for %s", t.Worker, deadAfter)
	t.Token = 0
	t.Lost++
	limit := r.Shape.LostLimit(r.StepOf(i))
	if t.Lost >= limit {
		r.event(i, durabletype.EventLost, now, fmt.Sprintf("%s (%d of %d lost in a row)", msg, t.Lost, limit), time.Time{})
		r.fail(i, Text(fmt.Sprintf("%s: %d attempts in a row lost their worker; the last: %s", PoisonText, t.Lost, msg)), true, rand, now)
		r.checkRun(now)
		return r.end(), true
	}
	// The steps of a dead worker are queued again each at a moment of its
	// own, within LostSpread of the rescue, rather than all at once: taken
	// back together they would be claimed together, by one worker, and a
	// poison step among them would take the others down with it again and
	// again, until they failed beside it.
	due := Timestamp(now.Add(time.Duration(spreadFraction(r.Rec.ID, t.Name, rand) * float64(LostSpread(deadAfter)))))
	r.event(i, durabletype.EventLost, now, fmt.Sprintf("%s (%d of %d lost in a row)", msg, t.Lost, limit), due)
	t.Error = Text(msg)
	t.Attempt--
	t.Worker = ""
	switch {
	case !r.wanted(i):
		r.cancel(i, now, "run is "+string(r.Rec.Status))
	case due.After(now):
		r.touch(i)
		t.State = durabletype.TaskQueued
		t.TimeoutAt = time.Time{}
		t.DueAt = due
		r.fx.Timer = true
	default:
		r.enqueue(i, now, "")
	}
	r.checkRun(now)
	return r.end(), true
}

// LostSpread is the longest a lost attempt's step waits, once taken back,
// before it is queued again (Run.Rescue): a quarter of deadAfter, at most
// 5 seconds.
func LostSpread(deadAfter time.Duration) time.Duration {
	return max(min(deadAfter/4, 5*time.Second), 0)
}

// spreadFraction is a fraction in [0, 1) of its own for each task of a
// rescue (rand is the rescue's), so that the tasks of one dead worker are
// queued again at different moments.
func spreadFraction(run uuid.UUID, name string, rand float64) float64 {
	h := fnv.New64a()
	h.Write(run[:])
	h.Write([]byte(name))
	x := h.Sum64() // mixed (MurmurHash3's finalizer): FNV's high bits barely change with a name's last byte
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	f := float64(x>>11)/(1<<53) + rand
	return f - math.Floor(f)
}

// giveBack takes the RUNNING task i back without counting its attempt (a
// release): it is queued again, with detail in its QUEUED
// event, or cancelled if its run no longer wants it.
func (r *Run) giveBack(i int, detail string, now time.Time) {
	t := r.Task(i)
	t.Attempt--
	t.Worker = ""
	if !r.wanted(i) {
		r.cancel(i, now, "run is "+string(r.Rec.Status))
		return
	}
	r.enqueue(i, now, detail)
}

// PoisonText starts the error recorded for a step that failed because its
// attempts kept losing their worker (durabletype.ErrPoisonStep).
const PoisonText = "step lost its worker too many times in a row"

// Cancel cancels a run that has not settled (ErrRunSettled otherwise; see
// Cancellable): it becomes CANCELLED with reason as its error; every task
// not finished is CANCELLED, timers included; the claims of RUNNING tasks
// are cleared, so that their workers learn it (Current is false,
// LostToCancel true) and their late outcomes are stale. The on-failure handler does not run for a
// cancelled run. The run settles at once.
func (r *Run) Cancel(reason string, now time.Time) (Effects, error) {
	r.begin()
	if !Cancellable(&r.Rec) {
		return r.end(), durabletype.ErrRunSettled
	}
	reason = Text(reason)
	r.Rec.Status = durabletype.RunCancelled
	r.Rec.FailedStep = ""
	r.Rec.Error = reason
	r.fx.RunChanged = true
	r.fx.Cancelled = true
	detail := "run cancelled"
	if reason != "" {
		detail += ": " + reason
	}
	for i := range r.Tasks {
		t := &r.Tasks[i]
		if t.State.Terminal() {
			continue
		}
		t.Token = 0
		r.cancel(i, now, detail)
	}
	r.checkRun(now)
	return r.end(), nil
}

// Cancellable reports whether run rec may be cancelled (Run.Cancel): its
// status allows it (durabletype.ActionCancel), or its status settled it
// unsuccessfully and its settlement is under way (FAILED, its on-failure
// handler or steps still running: cancelling it stops them).
func Cancellable(rec *store.Run) bool {
	return !rec.Settled() && (rec.Status.Allows(durabletype.ActionCancel) || rec.Status.Unsuccessful())
}

// InFlight reports whether run rec is in flight: its status is
// (durabletype.RunStatus.InFlight), or its status settled it and its
// settlement is under way (FAILED while its steps or its on-failure
// handler still run). The stats count these runs in flight, under their
// status; a run stops being in flight when it settles (Rec.FinishedAt is
// set), which a run whose status is in flight never has. memstore counts
// them so; pgstore's inflightRuns finds the same runs (the conformance
// suite holds both to it, for a run in every status).
func InFlight(rec *store.Run) bool {
	return rec.Status.InFlight() || !rec.Settled()
}

// Replay makes a settled run run again (a step an upgrade retired never
// runs again; see Upgrade), when its status allows it
// (durabletype.ActionReplay). The tasks to run again are those
// that FAILED or were CANCELLED, the step named from (when set) even if it
// completed, and every descendant of these; each is reset as new (PENDING,
// no attempt, no output) with a REPLAYED event, and those whose parents are
// resolved become ready (or are skipped, by the usual cascade). COMPLETED
// tasks outside that set keep their outputs and do not run again. The run
// is RUNNING again, its failure forgotten; its on-failure handler, if it
// ran, runs again after a new failure.
//
// Errors: ErrRunNotSettled (the run still runs, or a concurrent replay
// won), ErrNothingToReplay (a completed run and no from), ErrStepNotFound.
func (r *Run) Replay(from string, now time.Time) (Effects, error) {
	r.begin()
	if !r.Rec.Settled() || !r.Rec.Status.Allows(durabletype.ActionReplay) {
		return r.end(), durabletype.ErrRunNotSettled
	}
	if r.Shape.IsFunc(0) {
		return r.replayFuncRun(from, now)
	}
	n := r.Shape.Len()
	fromIdx := -1
	if from != "" {
		i, ok := r.Shape.Index(from)
		if !ok || i >= n || r.Shape.Spec(i).Retired {
			return r.end(), durabletype.ErrStepNotFound
		}
		fromIdx = i
	}
	reached := make([]bool, n) // i or an ancestor runs again
	again := make([]bool, n)
	forced := make([]bool, n)
	some := false
	for i := range n { // parents come before children
		switch r.Tasks[i].State {
		case durabletype.TaskFailed, durabletype.TaskCancelled:
			reached[i] = true
		}
		if i == fromIdx {
			reached[i], forced[i] = true, true
		}
		for _, p := range r.Shape.Parents(i) {
			reached[i] = reached[i] || reached[p]
			forced[i] = forced[i] || forced[p]
		}
		// A step an upgrade kept for its record keeps it: it never runs
		// again, and its descendants read its recorded output.
		again[i] = reached[i] && !r.Shape.Spec(i).Retired
		some = some || again[i]
	}
	if !some {
		return r.end(), durabletype.ErrNothingToReplay
	}
	detail := "replay"
	if from != "" {
		detail = "replay from step " + from
	}
	r.Rec.Status = durabletype.RunRunning
	r.Rec.FailedStep, r.Rec.Error = "", ""
	r.Rec.FinishedAt = time.Time{}
	r.fx.RunChanged = true
	for i := range n {
		if !again[i] {
			continue
		}
		r.event(i, durabletype.EventReplayed, now, detail, time.Time{})
		r.reset(i)
		if forced[i] && r.Tasks[i].Kind == durabletype.KindMap && r.Tasks[i].Items > 0 {
			// Forced to run again: none of its items keeps its output.
			for _, j := range r.itemsInOrder(i) {
				r.event(j, durabletype.EventReplayed, now, detail, time.Time{})
				r.resetTask(j)
			}
		}
	}
	for i := range n {
		if again[i] {
			r.resolve(i, now)
		}
	}
	r.checkRun(now)
	return r.end(), nil
}

// Expired reports whether retention may delete a run, at the cutoff
// before (PruneCutoff): it settled before it, and was created before it.
// The second follows from the first unless clocks disagree (a run created
// by an engine whose clock runs ahead and settled by one whose clock runs
// behind can settle before it was created): such a run is kept until the
// cutoff passes both, as pgstore, which finds the runs to delete by their
// creation time, keeps it. memstore calls it; pgstore's pruneRuns is its
// compiled form, checked against it by pgstore's TestPruneMatchesCore.
func Expired(rec *store.Run, before time.Time) bool {
	return rec.Settled() && rec.FinishedAt.Before(before) && rec.CreatedAt.Before(before)
}

// PruneOrder orders the expired runs a prune deletes first: the runs
// created first, then by ID (pgstore walks its runs by creation time).
func PruneOrder(a, b *store.Run) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), bytes.Compare(a.ID[:], b.ID[:]))
}

// PruneCutoff is the cutoff of a prune at now of the runs that settled
// more than olderThan ago (Expired), counted in whole microseconds, as
// stored times are.
func PruneCutoff(now time.Time, olderThan time.Duration) time.Time {
	return now.Add(-olderThan.Truncate(time.Microsecond))
}

// wanted reports whether the run still wants task i to run: the run is
// active, or i is its on-failure handler. (Items have indexes above Len.)
func (r *Run) wanted(i int) bool {
	return r.Rec.Status.Active() || i == r.Shape.Len()
}

func (r *Run) complete(i int, output []byte, now time.Time) {
	t := r.Task(i)
	t.Output = output
	t.Error = ""
	r.finish(i, durabletype.TaskCompleted, now)
	r.event(i, durabletype.EventCompleted, now, "", time.Time{})
	if r.Rec.Status.Active() && i < r.Shape.Len() {
		r.resolveChildren(i, now)
	}
}

// fail records a failed attempt of task i with msg, which must be Text.
func (r *Run) fail(i int, msg string, terminal bool, rand float64, now time.Time) {
	t := r.Task(i)
	t.Error = msg
	t.Worker = ""
	if !r.wanted(i) {
		r.cancel(i, now, "run is "+string(r.Rec.Status)+"; step error: "+msg)
		return
	}
	policy := r.Shape.Retry(r.StepOf(i))
	if !terminal && t.Attempt < policy.MaxAttempts {
		delay := RetryDelay(policy, t.Attempt, rand)
		due := Timestamp(now.Add(delay))
		r.touch(i)
		t.State = durabletype.TaskQueued
		t.TimeoutAt = time.Time{}
		t.WaitKey = ""
		r.event(i, durabletype.EventRetrying, now, msg, due)
		if delay <= 0 {
			r.enqueue(i, now, "")
		} else {
			t.DueAt = due
			r.fx.Timer = true
		}
		return
	}
	r.finish(i, durabletype.TaskFailed, now)
	r.event(i, durabletype.EventFailed, now, msg, time.Time{})
	switch {
	case IsItem(i):
		r.failMap(r.StepOf(i), t.Item, msg, now)
	case i < r.Shape.Len():
		r.failRun(i, msg, now)
	}
}

func (r *Run) failRun(failed int, msg string, now time.Time) {
	r.Rec.Status = durabletype.RunFailed
	r.Rec.FailedStep = r.Shape.Name(failed)
	r.Rec.Error = msg
	r.fx.RunChanged = true
	reason := fmt.Sprintf("run failed: step %q failed", r.Rec.FailedStep)
	for j := range r.Shape.Len() {
		switch r.Tasks[j].State {
		case durabletype.TaskPending, durabletype.TaskQueued, durabletype.TaskSleeping, durabletype.TaskWaiting:
			r.cancel(j, now, reason)
		}
	}
	r.startOnFailure(now)
}

// startOnFailure creates (or resets) the on-failure task of a failed run
// and enqueues it, if the workflow has a handler.
func (r *Run) startOnFailure(now time.Time) {
	if r.Shape.Shape.OnFailure == nil {
		return
	}
	n := r.Shape.Len()
	if len(r.Tasks) == n {
		r.Tasks = append(r.Tasks, store.Task{
			RunID: r.Rec.ID, Name: durabletype.OnFailureTask, Kind: durabletype.KindOnFailure, State: durabletype.TaskPending,
		})
		r.fx.NewTasks = append(r.fx.NewTasks, n)
	} else {
		// The handler ran after an earlier failure, before a replay: it
		// runs again, afresh.
		r.reset(n)
	}
	r.touch(n)
	r.enqueue(n, now, "")
}

// reset makes task i as new: PENDING, no attempt, no claim, no result.
func (r *Run) reset(i int) { r.resetTask(i) }

// resetTask makes task i as new: PENDING, no attempt, no claim, no
// result. A map step keeps its count of items (their rows stay), a child
// step its last child, an item its input, and every task its last
// heartbeat (a claim clears it; stores keep it as a worker wrote it).
func (r *Run) resetTask(i int) {
	t := r.Task(i)
	t.State = durabletype.TaskPending
	t.WaitKey = ""
	t.Left = 0
	t.Attempt = 0
	t.Lost = 0
	t.Token = 0
	t.Worker = ""
	t.DueAt = time.Time{}
	t.TimeoutAt = time.Time{}
	t.Output = nil
	t.Error = ""
	t.StartedAt = time.Time{}
	t.FinishedAt = time.Time{}
	r.touch(i)
}

func (r *Run) cancel(i int, now time.Time, reason string) {
	t := r.Task(i)
	r.abandon(i, now, reason)
	if Claimable(t) {
		r.fx.Dequeued = append(r.fx.Dequeued, i)
	}
	t.DueAt = time.Time{}
	t.TimeoutAt = time.Time{}
	t.Worker = ""
	r.finish(i, durabletype.TaskCancelled, now)
	r.event(i, durabletype.EventCancelled, now, reason, time.Time{})
}

// resolveChildren resolves the children of task i.
func (r *Run) resolveChildren(i int, now time.Time) {
	for _, c := range r.Shape.Children(i) {
		r.resolve(c, now)
	}
}

// resolve makes the PENDING task c ready once its parents are all resolved
// (a root at once). A task none of whose parents completed is skipped, and
// its children resolved in turn.
func (r *Run) resolve(c int, now time.Time) {
	if r.Tasks[c].State != durabletype.TaskPending {
		return
	}
	parents := r.Shape.Parents(c)
	completed := len(parents) == 0
	for _, p := range parents {
		switch r.Tasks[p].State {
		case durabletype.TaskCompleted:
			completed = true
		case durabletype.TaskSkipped:
		default:
			return
		}
	}
	if !completed {
		r.finish(c, durabletype.TaskSkipped, now)
		r.event(c, durabletype.EventSkipped, now, "all parents skipped", time.Time{})
		r.resolveChildren(c, now)
		return
	}
	r.becomeReady(c, now)
}

func (r *Run) becomeReady(i int, now time.Time) {
	r.becomeReadyAt(i, now, now)
}

// becomeReadyAt makes task i ready at now, a sleep step sleeping from
// from.
func (r *Run) becomeReadyAt(i int, now, from time.Time) {
	if !IsItem(i) && r.Shape.Kind(i) == durabletype.KindSleep {
		t := &r.Tasks[i]
		t.State = durabletype.TaskSleeping
		t.DueAt = Timestamp(from.Add(r.Shape.Shape.Steps[i].Sleep))
		t.StartedAt = now
		r.touch(i)
		r.fx.Timer = true
		r.event(i, durabletype.EventSleeping, now, "", t.DueAt)
		return
	}
	r.enqueue(i, now, "")
}

func (r *Run) enqueue(i int, now time.Time, detail string) {
	t := r.Task(i)
	t.State = durabletype.TaskQueued
	t.DueAt = time.Time{}
	t.TimeoutAt = time.Time{}
	if d := r.Shape.QueueTimeout(r.StepOf(i)); d > 0 {
		t.TimeoutAt = Timestamp(now.Add(d))
		r.fx.Timer = true
	}
	r.touch(i)
	r.fx.Enqueued = append(r.fx.Enqueued, i)
	r.event(i, durabletype.EventQueued, now, detail, time.Time{})
}

func (r *Run) finish(i int, state durabletype.TaskState, now time.Time) {
	t := r.Task(i)
	t.State = state
	t.TimeoutAt = time.Time{}
	t.FinishedAt = now
	r.touch(i)
	if state.Terminal() && r.Shape.IsFunc(i) {
		r.closeRecords(i, now, "function "+strings.ToLower(string(state)))
	}
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
	if r.Rec.Status.InFlight() { // not failed or cancelled: it completed
		r.Rec.Status = durabletype.RunCompleted
	}
	r.Rec.FinishedAt = now
	r.Rec.Deadline = time.Time{}
	r.fx.RunChanged = true
	r.fx.Settled = true
	if r.Rec.Parent != nil {
		r.fx.Outbox = append(r.fx.Outbox, r.settledMessage())
	}
}

// begin starts a transition: its effects start empty.
func (r *Run) begin() {
	r.fx = Effects{}
	if len(r.dirty) < r.Shape.Len()+1 {
		r.dirty = make([]bool, r.Shape.Len()+1)
	} else {
		clear(r.dirty)
	}
	if r.items != nil {
		clear(r.items.dirty)
	}
}

// end returns the effects of the transition in progress.
func (r *Run) end() Effects {
	for i, d := range r.dirty {
		if d {
			r.fx.Tasks = append(r.fx.Tasks, i)
		}
	}
	if r.items != nil {
		for j, d := range r.items.dirty {
			if d {
				r.fx.Tasks = append(r.fx.Tasks, ItemBase+j)
			}
		}
	}
	slices.Sort(r.fx.NewTasks)
	fx := r.fx
	r.fx = Effects{}
	return fx
}

func (r *Run) touch(i int) {
	if i >= ItemBase {
		r.items.dirty[i-ItemBase] = true
		return
	}
	r.dirty[i] = true
}

func (r *Run) event(i int, typ durabletype.EventType, now time.Time, detail string, due time.Time) {
	t := r.Task(i)
	r.fx.Events = append(r.fx.Events, durabletype.Event{
		RunID: r.Rec.ID, Step: t.Name, Type: typ, Attempt: t.Attempt,
		At: now, Detail: Text(detail), DueAt: due,
	})
}

// replayFuncRun is Replay for a function's run: its body runs again from
// the start, the calls before the first that did not complete (or before
// the first call named from) answering from their records, and every
// later call made anew (replayFunc).
func (r *Run) replayFuncRun(from string, now time.Time) (Effects, error) {
	body := &r.Tasks[0]
	if from == "" && body.State == durabletype.TaskCompleted {
		return r.end(), durabletype.ErrNothingToReplay
	}
	detail := "replay"
	if from != "" {
		detail = "replay from call " + from
	}
	r.event(0, durabletype.EventReplayed, now, detail, time.Time{})
	r.reset(0)
	if !r.replayFunc(0, from) {
		return r.end(), durabletype.ErrStepNotFound
	}
	r.Rec.Status = durabletype.RunRunning
	r.Rec.FailedStep, r.Rec.Error = "", ""
	r.Rec.FinishedAt = time.Time{}
	r.fx.RunChanged = true
	r.resolve(0, now)
	r.checkRun(now)
	return r.end(), nil
}
