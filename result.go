package durable

import (
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// RunStatus is the status of a run: RUNNING, then COMPLETED, FAILED or
// CANCELLED.
//
// Deprecated: use durabletype.RunStatus; this alias goes in the next
// release.
type RunStatus = durabletype.RunStatus

// Run statuses.
//
// Deprecated: use the names of package durabletype; these aliases go in the
// next release.
const (
	// Deprecated: use durabletype.RunRunning.
	RunRunning = durabletype.RunRunning
	// Deprecated: use durabletype.RunCompleted.
	RunCompleted = durabletype.RunCompleted
	// Deprecated: use durabletype.RunFailed.
	RunFailed = durabletype.RunFailed
	// Deprecated: use durabletype.RunCancelled.
	RunCancelled = durabletype.RunCancelled
)

// StepState is the state of one step of a run.
//
// Deprecated: use durabletype.TaskState; this alias goes in the next
// release.
type StepState = durabletype.TaskState

// Step states. A step waiting out a retry backoff is QUEUED with a DueAt;
// a step waiting for an event, a signal, a child run or its items is
// WAITING.
//
// Deprecated: use the names of package durabletype; these aliases go in the
// next release.
const (
	// Deprecated: use durabletype.TaskPending.
	StepPending = durabletype.TaskPending
	// Deprecated: use durabletype.TaskQueued.
	StepQueued = durabletype.TaskQueued
	// Deprecated: use durabletype.TaskRunning.
	StepRunning = durabletype.TaskRunning
	// Deprecated: use durabletype.TaskSleeping.
	StepSleeping = durabletype.TaskSleeping
	// Deprecated: use durabletype.TaskWaiting.
	StepWaiting = durabletype.TaskWaiting
	// Deprecated: use durabletype.TaskCompleted.
	StepCompleted = durabletype.TaskCompleted
	// Deprecated: use durabletype.TaskFailed.
	StepFailed = durabletype.TaskFailed
	// Deprecated: use durabletype.TaskSkipped.
	StepSkipped = durabletype.TaskSkipped
	// Deprecated: use durabletype.TaskCancelled.
	StepCancelled = durabletype.TaskCancelled
)

// EventType is the kind of an event in a run's log.
//
// Deprecated: use durabletype.EventType; this alias goes in the next
// release.
type EventType = durabletype.EventType

// Event types.
//
// Deprecated: use the names of package durabletype; these aliases go in the
// next release.
const (
	// Deprecated: use durabletype.EventQueued.
	EventQueued = durabletype.EventQueued
	// Deprecated: use durabletype.EventStarted.
	EventStarted = durabletype.EventStarted
	// Deprecated: use durabletype.EventCompleted.
	EventCompleted = durabletype.EventCompleted
	// Deprecated: use durabletype.EventFailed.
	EventFailed = durabletype.EventFailed
	// Deprecated: use durabletype.EventRetrying.
	EventRetrying = durabletype.EventRetrying
	// Deprecated: use durabletype.EventSkipped.
	EventSkipped = durabletype.EventSkipped
	// Deprecated: use durabletype.EventSleeping.
	EventSleeping = durabletype.EventSleeping
	// Deprecated: use durabletype.EventWoken.
	EventWoken = durabletype.EventWoken
	// Deprecated: use durabletype.EventCancelled.
	EventCancelled = durabletype.EventCancelled
	// Deprecated: use durabletype.EventReplayed.
	EventReplayed = durabletype.EventReplayed
	// Deprecated: use durabletype.EventWaiting.
	EventWaiting = durabletype.EventWaiting
	// Deprecated: use durabletype.EventUpgraded.
	EventUpgraded = durabletype.EventUpgraded
)

// Event is one entry of a run's event log.
//
// Deprecated: use durabletype.Event; this alias goes in the next release.
type Event = durabletype.Event

// ParentRef links a child run to its parent: the parent run, its step that
// started the child, and the child's step whose output is the result.
//
// Deprecated: use durabletype.ParentRef; this alias goes in the next
// release.
type ParentRef = durabletype.ParentRef

// OnFailureStep is the step name under which a run's on-failure handler
// appears in results and events.
//
// Deprecated: use durabletype.OnFailureTask; this alias goes in the next
// release.
const OnFailureStep = durabletype.OnFailureTask

// RunResult is the state of a run: its status, the error of the step that
// failed it, and every step. Read typed outputs with StepRef.Result.
type RunResult struct {
	// ID is the run's ID.
	ID uuid.UUID
	// Workflow is the name of the run's workflow.
	Workflow string
	// Version is the version of the workflow the run is pinned to: only
	// engines that registered that version run its steps. Empty for a run
	// started before versions existed.
	Version string
	// Tenant is the tenant the run belongs to.
	Tenant string
	// Status is RUNNING, COMPLETED, FAILED or CANCELLED.
	Status durabletype.RunStatus
	// Err is the *RunError of a FAILED or CANCELLED run, nil otherwise.
	Err error
	// Input is the run's encoded input.
	Input []byte
	// CreatedAt is when the run was started.
	CreatedAt time.Time
	// FinishedAt is when the run settled; zero until then.
	FinishedAt time.Time
	// IdempotencyKey is the key the run was triggered with, if any.
	IdempotencyKey string
	// Priority is the run's priority.
	Priority Priority
	// Deadline is when the run fails if it has not settled; zero when it
	// has none or has settled.
	Deadline time.Time
	// Parent links a child run (see Child) to its parent run and the step
	// that started it; nil for other runs.
	Parent *durabletype.ParentRef
	// Steps lists every step in declaration order; the on-failure handler,
	// once it exists, comes last under the name OnFailureStep.
	Steps []StepResult

	codec Codec
}

// Done reports whether the run has settled: it is COMPLETED, FAILED or
// CANCELLED and every step, on-failure handler included, is finished.
func (r *RunResult) Done() bool { return !r.FinishedAt.IsZero() }

// Step returns the step with the given name.
func (r *RunResult) Step(name string) (*StepResult, bool) {
	for i := range r.Steps {
		if r.Steps[i].Name == name {
			return &r.Steps[i], true
		}
	}
	return nil, false
}

// StepResult is the state of one step of a run.
type StepResult struct {
	// Name is the step's name (OnFailureStep for the on-failure handler).
	Name string
	// Parents are the step's parents, as the run recorded its shape.
	Parents []string
	// Kind tells a step, a sleep and the on-failure handler apart.
	Kind durabletype.TaskKind
	// Retired is set on a step that an upgrade kept only for its record:
	// the version the run moved to does not run it (Engine.UpgradeRuns).
	Retired bool
	// State is the step's state (PENDING, QUEUED, RUNNING, ...).
	State durabletype.TaskState
	// Attempts is the number of the latest attempt (0 if it never ran).
	Attempts int
	// Error is the latest error of the step, if any.
	Error string
	// DueAt is when a sleeping step wakes or a retry backoff ends.
	DueAt time.Time
	// StartedAt is when the latest attempt started; zero if it never ran.
	StartedAt time.Time
	// FinishedAt is when the step reached its final state; zero until then.
	FinishedAt time.Time
	// Output is the encoded output of a COMPLETED step. A map step's
	// output is its items' outputs (Items); StepRef.Result decodes them.
	Output []byte
	// EventKey is the key a WaitForEvent step waits for (or last waited
	// for; empty before it first waits), and Signal the name of a
	// WaitForSignal step's signal.
	EventKey, Signal string
	// ChildRunID is the child run a Child step started last.
	ChildRunID uuid.UUID
	// Patch is set on a call of a function that records a patch marker
	// (Patched), not a step. A function's calls follow its body, each
	// named "name#number", its number in Item; their DueAt, EventKey and
	// Signal are what they wait (or waited) for.
	Patch bool
	// Items are a map step's items, in order; Item is an item's number.
	Items []StepResult
	Item  int

	items int // of a map step: how many it fanned out to
}

// itemOutputs returns the outputs of a map step's items, in order.
func (s *StepResult) itemOutputs() [][]byte {
	out := make([][]byte, len(s.Items))
	for k := range s.Items {
		out[k] = s.Items[k].Output
	}
	return out
}

func newRunResult(run *store.Run, tasks []*store.Task, codec Codec) *RunResult {
	res := &RunResult{
		ID: run.ID, Workflow: run.Workflow, Version: run.Version, Tenant: run.Tenant, Status: run.Status, Input: run.Input,
		CreatedAt: run.CreatedAt, FinishedAt: run.FinishedAt, codec: codec,
		IdempotencyKey: run.IdempotencyKey, Priority: Priority(run.Priority), Deadline: run.Deadline,
		Parent: run.Parent,
	}
	if run.Status == durabletype.RunFailed || run.Status == durabletype.RunCancelled {
		res.Err = &RunError{RunID: run.ID, Workflow: run.Workflow, Status: run.Status, Step: run.FailedStep, Message: run.Error}
	}
	parents := map[string][]string{}
	signals := map[string]string{}
	retired := map[string]bool{}
	if run.Shape != nil {
		for _, st := range run.Shape.Steps {
			parents[st.Name] = st.Parents
			retired[st.Name] = st.Retired
			if st.Wait != nil {
				signals[st.Name] = st.Wait.Signal
			}
		}
	}
	res.Steps = make([]StepResult, 0, len(tasks))
	for _, t := range tasks {
		sr := StepResult{
			Name: dag.DisplayName(t.Name), Parents: parents[t.Name], Kind: t.Kind, Retired: retired[t.Name], State: t.State, Attempts: t.Attempt, Error: t.Error,
			DueAt: t.DueAt, StartedAt: t.StartedAt, FinishedAt: t.FinishedAt, Output: t.Output,
			ChildRunID: t.Child, Item: t.Item,
		}
		key, sig := dag.ParseWaitKey(t.WaitKey)
		if !sig {
			sr.EventKey = key
		}
		sr.Signal = signals[t.Name] // known before the step waits
		if sig && sr.Signal == "" {
			sr.Signal = key // a function's body waiting for a signal
		}
		if _, _, _, ok := dag.ParseRecord(t.Name); ok {
			sr.DueAt, sr.Patch = dag.RecordedDue(t), dag.IsPatch(t)
			if key, sig := dag.RecordedWait(t); sig {
				sr.Signal = key
			} else {
				sr.EventKey = key
			}
		}
		if t.Kind == durabletype.KindItem {
			// Items follow their map step, whose results they join (a map
			// step's Items hold those it fanned out to).
			if n := len(res.Steps); n > 0 && res.Steps[n-1].Kind == durabletype.KindMap {
				m := &res.Steps[n-1]
				if t.Item < m.items {
					m.Items = append(m.Items, sr)
				}
			}
			continue
		}
		sr.items = t.Items
		res.Steps = append(res.Steps, sr)
	}
	return res
}
