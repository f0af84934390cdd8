package durabletest

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// runState is what a run (and its child runs) waits for, as analyze found
// it at an instant where the engine was idle.
type runState struct {
	// active is set when something of the run happens without input from
	// outside the engine: a step runs or is ready, a sleep, a retry
	// backoff, a timeout or a deadline is due.
	active bool
	// busy is set when something of the run happens now, as the engine
	// sees it when it is not idle: a step runs or is ready (for a live
	// worker), a sleep, a backoff, a timeout or a deadline is due. The kit
	// on PostgreSQL waits for no run to be busy (Kit.Idle).
	busy bool
	// now is the instant the analysis compares due times with.
	now time.Time
	// lines describe the unfinished steps.
	lines []string
}

// due marks st active, and busy too if at is not after now.
func (st *runState) due(at time.Time) {
	st.active = true
	if !at.After(st.now) {
		st.busy = true
	}
}

func (st *runState) add(indent, format string, args ...any) {
	st.lines = append(st.lines, indent+fmt.Sprintf(format, args...))
}

func (st *runState) describe() string {
	if len(st.lines) == 0 {
		return "  (no unfinished step)"
	}
	return strings.Join(st.lines, "\n")
}

// analyze reads what run res waits for, from the store's records of its
// tasks (which say more than a RunResult: the timeouts due), as of now.
func (k *Kit) analyze(res *durable.RunResult) *runState {
	k.tb.Helper()
	return k.analyzeAt(res.ID, res.Workflow, res.Tenant, k.now())
}

// analyzeAt is analyze for run id of workflow and tenant, comparing due
// times with now.
func (k *Kit) analyzeAt(id uuid.UUID, workflow, tenant string, now time.Time) *runState {
	k.tb.Helper()
	st := &runState{now: now}
	served := map[string]bool{}
	k.walk(id, workflow, tenant, "  ", st, served, 0)
	return st
}

// maxDepth bounds how deep analyze follows child runs.
const maxDepth = 8

// walk describes the unfinished tasks of run id (of workflow and tenant)
// into st, following its child runs.
func (k *Kit) walk(id uuid.UUID, workflow, tenant, indent string, st *runState, served map[string]bool, depth int) {
	k.tb.Helper()
	run, err := k.store.GetRun(k.ctx, id)
	if err != nil {
		k.tb.Fatalf("durabletest: run %s: %v", id, err)
	}
	if run.Settled() {
		return
	}
	if !run.Deadline.IsZero() {
		st.due(run.Deadline)
		st.add(indent, "the run fails at its deadline, %s", st.stamp(run.Deadline))
	}
	tasks, err := k.store.ListTasks(k.ctx, id)
	if err != nil {
		k.tb.Fatalf("durabletest: run %s: %v", id, err)
	}
	for _, t := range tasks {
		name := fmt.Sprintf("step %q", dag.DisplayName(t.Name))
		if _, _, _, ok := dag.ParseRecord(t.Name); ok {
			// A call of a durable function: what the function waits for
			// is its body's state, described with the body; a child run
			// is described under its call.
			if t.Kind == durabletype.KindChild && t.State == durabletype.TaskWaiting {
				k.describeChild(t, fmt.Sprintf("call %q", dag.DisplayName(t.Name)), "", indent, st, served, depth)
			}
			continue
		}
		if t.TimeoutAt.After(time.Time{}) && !terminal(t.State) {
			st.due(t.TimeoutAt) // fails at its timeout, at the latest
		}
		switch t.State {
		case durabletype.TaskCompleted, durabletype.TaskFailed, durabletype.TaskSkipped, durabletype.TaskCancelled:
		case durabletype.TaskPending:
			st.add(indent, "%s PENDING: waits for its parents", name)
		case durabletype.TaskQueued:
			switch {
			case t.Kind == durabletype.KindFunc && t.DueAt.After(st.now):
				st.active = true
				st.add(indent, "%s (a function) QUEUED: runs again at %s, to retry a call", name, st.stamp(t.DueAt))
			case t.DueAt.After(st.now):
				st.active = true
				st.add(indent, "%s QUEUED: attempt %d at %s", name, t.Attempt+1, st.stamp(t.DueAt))
			case !k.serves(workflow, served):
				st.add(indent, "%s QUEUED: no live worker serves workflow %q (register it with Kit.Register)", name, workflow)
			default:
				st.active, st.busy = true, true
				st.add(indent, "%s QUEUED: ready to run", name)
			}
		case durabletype.TaskRunning:
			st.active, st.busy = true, true
			st.add(indent, "%s RUNNING: attempt %d, started %s, has not returned", name, t.Attempt, st.stamp(t.StartedAt))
		case durabletype.TaskSleeping:
			st.due(t.DueAt)
			st.add(indent, "%s SLEEPING until %s", name, st.stamp(t.DueAt))
		case durabletype.TaskWaiting:
			due := ""
			if !t.DueAt.IsZero() {
				st.due(t.DueAt)
				due = fmt.Sprintf(" (times out at %s)", st.stamp(t.DueAt))
			}
			switch {
			case t.Kind == durabletype.KindChild:
				k.describeChild(t, name, due, indent, st, served, depth)
			case t.Kind == durabletype.KindFunc && t.WaitKey == "":
				st.add(indent, "%s (a function) WAITING for %d of its child runs%s", name, t.Left, due)
			case t.Kind == durabletype.KindMap:
				st.add(indent, "%s WAITING for its %d items (%d not completed)%s", name, t.Items, t.Left, due)
			default:
				if key, signal := dag.ParseWaitKey(t.WaitKey); signal {
					st.add(indent, "%s WAITING for the signal %q to its run (send it with Kit.Signal)%s", name, key, due)
				} else {
					st.add(indent, "%s WAITING for the event %q of tenant %q (send it with Kit.SendEvent)%s", name, key, tenant, due)
				}
			}
		default:
			st.add(indent, "%s %s", name, t.State)
		}
	}
}

// describeChild describes task t, which waits for its child run, and the
// child run under it.
func (k *Kit) describeChild(t *store.Task, name, due, indent string, st *runState, served map[string]bool, depth int) {
	k.tb.Helper()
	st.add(indent, "%s WAITING for its child run %s%s:", name, t.Child, due)
	if t.Child != uuid.Nil && depth < maxDepth {
		child, err := k.store.GetRun(k.ctx, t.Child)
		if err != nil {
			k.tb.Fatalf("durabletest: child run %s: %v", t.Child, err)
		}
		k.walk(child.ID, child.Workflow, child.Tenant, indent+"    ", st, served, depth+1)
	}
}

func terminal(s durabletype.TaskState) bool {
	switch s {
	case durabletype.TaskCompleted, durabletype.TaskFailed, durabletype.TaskSkipped, durabletype.TaskCancelled:
		return true
	}
	return false
}

// serves reports whether a live worker serves workflow (memoized in
// served for one analysis).
func (k *Kit) serves(workflow string, served map[string]bool) bool {
	k.tb.Helper()
	if ok, known := served[workflow]; known {
		return ok
	}
	ws, err := k.engine.Workers(k.ctx)
	if err != nil {
		k.tb.Fatalf("durabletest: %v", err)
	}
	ok := len(durable.Unserved(ws, workflow)) == 0
	served[workflow] = ok
	return ok
}

// stamp formats a time, and how far from the analysis's now it is.
func (st *runState) stamp(t time.Time) string {
	d := t.Sub(st.now)
	switch {
	case d > 0:
		return fmt.Sprintf("%s (in %s)", t.UTC().Format(time.RFC3339Nano), d)
	case d < 0:
		return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339Nano), -d)
	}
	return t.UTC().Format(time.RFC3339Nano) + " (now)"
}
