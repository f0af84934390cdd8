package dag

import (
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// The calls that apply one transition per item they are given (outcomes,
// due timers, dead claims, messages), written once: a driver loads the
// runs the items name and reads the items in its order; these apply them,
// in that order, through the call's Change.

// Finish applies outcomes in order (Run.Finish). find returns the loaded
// run and index of an outcome's task, ok false when the call did not load
// it: the outcome is stale.
func (c *Change) Finish(outcomes []store.Outcome, find func(ref store.TaskRef) (r *Run, i int, ok bool)) []store.FinishResult {
	res := make([]store.FinishResult, len(outcomes))
	for k := range outcomes {
		o := &outcomes[k]
		r, i, ok := find(o.Task)
		if !ok {
			res[k].Status = store.FinishStale
			continue
		}
		fx, st := r.Finish(i, o, c.Now)
		res[k] = r.Result(i, o, fx, st)
		c.Add(r, fx)
	}
	return res
}

// DueKind is what a due timer ends.
type DueKind int

const (
	// DueTask is a task's own timer: a sleep, a retry backoff, a start
	// delay, a timeout (Run.Wake).
	DueTask DueKind = iota
	// DueDeadline is its run's deadline (Run.Expire).
	DueDeadline
	// DueLapsed is the end of the rate-limit window that admitted a task
	// left unclaimed (Run.Requeue).
	DueLapsed
)

// Due is a timer that is due: of task I of run R, or of R itself.
type Due struct {
	R    *Run
	I    int
	Kind DueKind
}

// Fire applies due timers in order and returns how many fired.
func (c *Change) Fire(due []Due, rand float64) int {
	fired := 0
	for _, d := range due {
		var fx Effects
		var ok bool
		switch d.Kind {
		case DueDeadline:
			fx, ok = d.R.Expire(c.Now)
		case DueLapsed:
			fx, ok = d.R.Requeue(d.I, RateRequeueDetail, c.Now)
		default:
			fx, ok = d.R.Wake(d.I, rand, c.Now)
		}
		if ok {
			fired++
		}
		c.Add(d.R, fx)
	}
	return fired
}

// Rescue gives the claims of dead tasks back (Run.Rescue), in order, and
// returns the claims rescued and the workflow of each.
func (c *Change) Rescue(dead []TaskAt, deadAfter time.Duration, rand float64) (rescued []store.TaskRef, workflows []string) {
	for _, d := range dead {
		r, i := d.R, d.I
		ref := store.TaskRef{RunID: r.Rec.ID, Step: r.Task(i).Name, Token: r.Task(i).Token}
		fx, ok := r.Rescue(i, deadAfter, rand, c.Now)
		if ok {
			rescued = append(rescued, ref)
			workflows = append(workflows, r.Rec.Workflow)
		}
		c.Add(r, fx)
	}
	return rescued, workflows
}

// NewRecord returns the record of a new run of the compiled shape created
// at now, as CreateRuns creates it (a spawning transition adds the parent).
func NewRecord(nr *store.NewRun, shape *Compiled, now time.Time) store.Run {
	_, deadline := Times(nr, now)
	return store.Run{
		ID: nr.ID, Workflow: nr.Workflow, Version: shape.Shape.Version, Tenant: nr.Tenant, Input: nr.Input,
		IdempotencyKey: nr.IdempotencyKey, Priority: nr.Priority, Deadline: deadline, TraceParent: nr.TraceParent,
	}
}

// Apply applies messages in order (Run.Apply), each to the run run
// returns for it (nil: the run is gone, the message is dropped), and
// reports which changed their run, and which the task they were for
// refused (an event whose payload does not fit the task's type; nil for
// the others).
func (c *Change) Apply(msgs []Message, run func(m *Message) *Run) (applied []bool, refused []*durabletype.Refusal) {
	applied = make([]bool, len(msgs))
	refused = make([]*durabletype.Refusal, len(msgs))
	for k := range msgs {
		m := &msgs[k]
		r := run(m)
		if r == nil {
			continue
		}
		fx, ok := r.Apply(m, c.Now)
		if len(fx.Refused) > 0 {
			refused[k] = &fx.Refused[0]
		}
		c.Add(r, fx)
		applied[k] = ok
	}
	return applied, refused
}
