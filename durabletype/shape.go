package durabletype

import "time"

// Shape is the DAG of a workflow as recorded with each run at trigger time,
// so that a deploy that changes the workflow does not break runs in flight.
type Shape struct {
	// Version is the version of the workflow this shape is of: the
	// definition's fingerprint or the version its author set (see
	// docs/semantics.md, "Versions and deploys"). A run is pinned to it:
	// only engines that registered the workflow at this version claim its
	// tasks. Empty for runs recorded before versions existed, which any
	// engine that registered the workflow serves.
	Version string `json:"version,omitempty"`
	// Input names the Go type of the run's input; empty when unknown.
	Input string `json:"input,omitempty"`
	// Steps in declaration order; a step's parents come before it.
	Steps []StepSpec `json:"steps"`
	// OnFailure is set when the workflow has an on-failure handler.
	OnFailure *OnFailureSpec `json:"on_failure,omitempty"`
}

// StepSpec is one step of a Shape.
type StepSpec struct {
	Name    string   `json:"name"`
	Parents []string `json:"parents,omitempty"`
	// Output names the Go type of the step's output; empty when unknown.
	Output string `json:"output,omitempty"`
	// Retired marks a step that an upgrade to another version kept only
	// for its record (dag.Run.Upgrade): the step is finished, the version
	// the run moved to does not have it (or has it in another form), and
	// it never runs again, not even when the run is replayed.
	Retired bool `json:"retired,omitempty"`
	// Sleep, when positive, makes this a durable sleep step.
	Sleep time.Duration `json:"sleep,omitempty"`
	Retry RetryPolicy   `json:"retry"`
	// LostLimit, when positive, is how many attempts in a row may lose
	// their worker (no heartbeat for DeadAfter: the process died, froze or
	// lost the database) before the step fails with ErrPoisonStep; 0 means
	// DefaultLostLimit. A lost attempt does not spend a retry.
	LostLimit int `json:"lost_limit,omitempty"`
	// Timeout, when positive, bounds each attempt: an attempt still
	// RUNNING Timeout after its claim fails (and is retried per Retry),
	// and its claim's late outcome is refused.
	Timeout time.Duration `json:"timeout,omitempty"`
	// QueueTimeout, when positive, bounds the wait for a worker: a task
	// still ready and unclaimed QueueTimeout after it became ready fails
	// the step without retry.
	QueueTimeout time.Duration `json:"queue_timeout,omitempty"`
	// Concurrency, when positive, caps the tasks of this step that hold a
	// slot of their concurrency key (Task.ConcurrencyKey) at once: admitted
	// to the ready queue or RUNNING. The others wait, parked in FIFO order
	// per key, until a slot frees. See docs/semantics.md.
	Concurrency int `json:"concurrency,omitempty"`
	// Rate, when set, limits how many tasks of this step sharing a rate key
	// (Task.RateKey) are admitted per window.
	Rate *RateLimit `json:"rate,omitempty"`
	// Wait, when set, makes this a step that waits for an event or a
	// signal (KindEvent).
	Wait *WaitSpec `json:"wait,omitempty"`
	// Child, when set, makes this a step that starts a child run and waits
	// for it (KindChild).
	Child *ChildSpec `json:"child,omitempty"`
	// Map, when set, makes this a map step (KindMap): its function runs on
	// each item of a parent's list, or of a list taken from the run's
	// input, one task per item.
	Map *MapSpec `json:"map,omitempty"`
	// Func, when set, makes this the body of a durable function
	// (KindFunc): the one step of a function's shape.
	Func *FuncSpec `json:"func,omitempty"`
}

// FuncSpec describes the body of a durable function. Its version is the
// shape's, which the function's author sets (a function's code cannot be
// fingerprinted).
type FuncSpec struct{}

// WaitSpec describes a step that waits for an event or a signal. Its
// worker computes the key of the event it waits for (Outcome.Key); a step
// waiting for a signal waits for the signal named Signal, sent to its run.
type WaitSpec struct {
	// Signal is the name of the signal the step waits for; empty for a
	// step waiting for an event.
	Signal string `json:"signal,omitempty"`
	// Timeout, when positive, bounds the wait: counted from the moment the
	// wait begins, the step then fails (without retry), or is skipped when
	// SkipOnTimeout is set.
	Timeout       time.Duration `json:"timeout,omitempty"`
	SkipOnTimeout bool          `json:"skip_on_timeout,omitempty"`
	// Lookback: an event sent at most this long before the wait began is
	// delivered to it as if it had been sent while it waited (the first
	// such event). Signals are kept with their run and always delivered.
	Lookback time.Duration `json:"lookback,omitempty"`
	// Payload, when set, describes the type the step awaits: a payload
	// that does not fit it is refused, and the step keeps waiting (see
	// docs/semantics.md, "Events"). Nil for shapes recorded before
	// payloads were checked, and for engines whose Codec is not the JSON
	// codec: then nothing is checked. A workflow's version does not cover
	// it.
	Payload *JSONType `json:"payload,omitempty"`
}

// ChildSpec describes a step that starts a run of another workflow as a
// child run and waits for it.
type ChildSpec struct {
	// Workflow is the child's workflow.
	Workflow string `json:"workflow"`
	// Result is the child's step whose output becomes this step's output.
	Result string `json:"result"`
}

// MapSpec describes a map step.
type MapSpec struct {
	// Over is the parent whose output is the list of items; empty when
	// the step maps over a list taken from the run's input
	// (durable.MapInput), which its worker selects when the step starts.
	Over string `json:"over"`
}

// RateLimit is a rate limit recorded for a step: at most N admissions to
// the ready queue per key in each window of length Per, windows aligned to
// multiples of Per since the Unix epoch.
type RateLimit struct {
	N   int           `json:"n"`
	Per time.Duration `json:"per"`
}

// OnFailureSpec describes a workflow's on-failure handler.
type OnFailureSpec struct {
	Retry RetryPolicy `json:"retry"`
	// LostLimit is StepSpec.LostLimit for the handler.
	LostLimit int `json:"lost_limit,omitempty"`
}

// DefaultLostLimit is the LostLimit of a step that sets none: its third
// attempt in a row to lose its worker fails it.
const DefaultLostLimit = 3

// RetryPolicy is the retry policy recorded for a task.
type RetryPolicy struct {
	// MaxAttempts counts every attempt, the first included (at least 1).
	MaxAttempts int `json:"max_attempts"`
	// InitialDelay is the wait before the second attempt.
	InitialDelay time.Duration `json:"initial_delay,omitempty"`
	// Factor multiplies the delay after each further attempt (at least 1).
	Factor float64 `json:"factor,omitempty"`
	// MaxDelay caps the delay (0: no cap).
	MaxDelay time.Duration `json:"max_delay,omitempty"`
	// Jitter is the fraction of the delay that is randomised, in [0, 1].
	Jitter float64 `json:"jitter,omitempty"`
}
