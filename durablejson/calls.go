package durablejson

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
)

// Kinds of runs and workflows (RunDetail.Kind, Workflow.Kind).
const (
	// KindWorkflow is a workflow declared as a DAG of steps.
	KindWorkflow = "workflow"
	// KindFunction is a durable function (durable.NewFunction): one step,
	// its body ("main", of kind "func"), whose calls are its Calls.
	KindFunction = "function"
)

// CallPatch is the Kind of a call that records a patch marker
// (durable.Patched) rather than a step.
const CallPatch = "patch"

// Call is one call a durable function's body made (RunDetail.Calls): a
// step (Do, DoTx, Go), a sleep (SleepFor), a wait for an event or a
// signal (AwaitEvent, AwaitSignal), a child run (StartChild,
// StartWorkflow) or a patch marker (Patched).
type Call struct {
	// Number is the call's place among the body's calls, from 0; Name is
	// the name the code gave it (several calls may share a name); the
	// event log and failures name it "name#number".
	Number int    `json:"number"`
	Name   string `json:"name"`
	// Kind is "step", "sleep", "event" (an event or a signal), "child" or
	// "patch".
	Kind string `json:"kind"`
	// State is COMPLETED or FAILED once the call is over; a step waiting
	// to run again is PENDING (DueAt its retry's time), a sleep SLEEPING
	// (DueAt its end), a wait or a child run WAITING (DueAt the wait's
	// timeout, if any); CANCELLED when the function ended without it.
	State durabletype.TaskState `json:"state"`
	// Attempts is the number of a step's latest attempt.
	Attempts int    `json:"attempts"`
	Error    string `json:"error"`
	// DueAt is when the call stops waiting (see State); null when it does
	// not wait.
	DueAt *time.Time `json:"due_at"`
	// StartedAt is when a step's latest attempt began (by its worker's
	// clock), or when a sleep, a wait or a child run was made;
	// FinishedAt when the call was over (a step's result recorded).
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// EventKey and Signal are what a wait waits (or waited) for, and
	// ChildRunID the run a child call started.
	EventKey   string     `json:"event_key,omitempty"`
	Signal     string     `json:"signal,omitempty"`
	ChildRunID *uuid.UUID `json:"child_run_id,omitempty"`
	// Output, OutputBase64 and OutputOmitted are the call's result as
	// Step has a step's output (a wait's payload, a child run's result).
	Output        json.RawMessage `json:"output,omitempty"`
	OutputBase64  string          `json:"output_base64,omitempty"`
	OutputOmitted int             `json:"output_omitted,omitempty"`
}

// IsFunction reports whether res is a run of a durable function: its
// first step is a function's body.
func IsFunction(res *durable.RunResult) bool {
	return len(res.Steps) > 0 && res.Steps[0].Kind == durabletype.KindFunc
}

// CallName returns the name and the number of the call step s of a
// function's run records, named "name#number"; ok is false for a step that
// is not a call (the body, the on-failure handler).
func CallName(s *durable.StepResult) (name string, number int, ok bool) {
	if s.Kind == durabletype.KindFunc || s.Kind == durabletype.KindItem {
		return "", 0, false
	}
	name, ok = strings.CutSuffix(s.Name, "#"+strconv.Itoa(s.Item))
	return name, s.Item, ok && name != ""
}

// SplitCalls splits the steps of a function's run res into its steps (its
// body, its on-failure handler) and its calls, by number; a run of
// another workflow has only steps.
func SplitCalls(res *durable.RunResult) (steps, calls []durable.StepResult) {
	if !IsFunction(res) {
		return res.Steps, nil
	}
	calls = []durable.StepResult{}
	for _, s := range res.Steps {
		if _, _, ok := CallName(&s); ok {
			calls = append(calls, s)
		} else {
			steps = append(steps, s)
		}
	}
	slices.SortStableFunc(calls, func(a, b durable.StepResult) int { return cmp.Compare(a.Item, b.Item) })
	return steps, calls
}

// CallWaiting reports whether call s waits for its due time: a sleep, a
// wait with a timeout, or a step waiting for its retry.
func CallWaiting(s *durable.StepResult) bool {
	return !s.DueAt.IsZero() &&
		(s.State == durabletype.TaskSleeping || s.State == durabletype.TaskWaiting || s.State == durabletype.TaskPending)
}

// CallKind returns the Kind of call s: its step kind, or "patch".
func CallKind(s *durable.StepResult) string {
	if s.Patch {
		return CallPatch
	}
	return string(s.Kind)
}

// newCall builds the document of call s.
func newCall(s *durable.StepResult, maxValue int) Call {
	name, n, _ := CallName(s)
	out := Call{Number: n, Name: name, Kind: CallKind(s), State: s.State, Attempts: s.Attempts, Error: s.Error,
		StartedAt: Time(s.StartedAt), FinishedAt: Time(s.FinishedAt), EventKey: s.EventKey, Signal: s.Signal}
	if CallWaiting(s) {
		out.DueAt = Time(s.DueAt)
	}
	if s.ChildRunID != uuid.Nil {
		id := s.ChildRunID
		out.ChildRunID = &id
	}
	out.Output, out.OutputBase64, out.OutputOmitted = Value(s.Output, maxValue)
	return out
}
