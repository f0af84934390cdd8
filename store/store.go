// Package store is the port between the durable engine and its storage.
//
// A Store is shaped by transitions, not tables: "finish this claimed task with
// this output" is one call that atomically records the output, resolves the
// task's children, enqueues the ones that became ready, appends events and
// settles the run when everything is terminal. Every method that changes state
// is one atomic unit: a process may die before or after it, never inside it.
//
// Two implementations ship with the module: memstore (in memory, for tests and
// demos) and pgstore (PostgreSQL). Both pass the same conformance suite in
// store/storetest, which is what makes them substitutable.
//
// Methods take a params struct and return a result, so fields can be added
// without breaking callers. Every params struct carries Now: the zero value
// means "the store's own clock" (time.Now in memory, now() in PostgreSQL);
// tests pass explicit times to get deterministic results.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
)

// Store is the set of transitions and reads the engine needs.
type Store interface {
	// CreateRuns records new runs with their tasks, recording each run's
	// shape, and makes every root task ready (or asleep, for a sleep root;
	// or waiting for its StartAt). All runs are created in one atomic unit.
	//
	// A new run that duplicates one already recorded (or earlier in the
	// call) is not created: the result reports the recorded run's ID with
	// Duplicate set. A duplicate has the same idempotency key (the same
	// workflow, tenant and IdempotencyKey), or the same ID with the same
	// workflow and tenant. A run whose ID is taken by a run of another
	// workflow or tenant fails the whole call with ErrRunExists. Under
	// concurrency exactly one of the callers creating the same key (or ID)
	// creates the run; the others report it as a duplicate.
	CreateRuns(ctx context.Context, p *CreateRunsParams) (*CreateRunsResult, error)

	// ClaimTasks claims up to Limit ready tasks in fair order for a worker:
	// each becomes RUNNING with its attempt number incremented and a fresh
	// claim token. Tasks of workflows not listed in Workflows are left for
	// other workers.
	ClaimTasks(ctx context.Context, p *ClaimTasksParams) ([]*ClaimedTask, error)

	// FinishTasks applies the outcomes of claimed tasks. Each outcome is
	// checked against its claim token: an outcome from a claim that is no
	// longer current is rejected (FinishStale) and changes nothing; replaying
	// an outcome that was already recorded reports FinishDuplicate. The whole
	// batch is one atomic unit.
	FinishTasks(ctx context.Context, p *FinishTasksParams) ([]FinishResult, error)

	// Heartbeat vouches for the listed claims: each that is still current
	// has its heartbeat time set to Now. It reports the claims that are no
	// longer current. A claim is vouched for only by a heartbeat that lists
	// it, so a process restarted under the same worker ID never keeps its
	// dead predecessor's claims alive.
	Heartbeat(ctx context.Context, p *HeartbeatParams) (*HeartbeatResult, error)

	// FireTimers fires due timers: a sleeping task completes and its children
	// are resolved; a task waiting out a retry backoff or a delayed start
	// becomes ready; an attempt past its timeout fails; a ready task past
	// its queue timeout fails; a run past its deadline fails (see
	// dag.Run.Wake and dag.Run.Expire). It reports how long until the next
	// timer is due.
	FireTimers(ctx context.Context, p *FireTimersParams) (*FireTimersResult, error)

	// RescueTasks finds RUNNING tasks neither claimed nor heartbeated within
	// DeadAfter and treats each as a failed attempt: retried while attempts
	// remain, failed otherwise.
	RescueTasks(ctx context.Context, p *RescueTasksParams) (*RescueTasksResult, error)

	// GetRun returns a run, or ErrRunNotFound.
	GetRun(ctx context.Context, id uuid.UUID) (*Run, error)

	// ListTasks returns the tasks of a run in the order of its shape, the
	// on-failure task (if it was created) last, or ErrRunNotFound.
	ListTasks(ctx context.Context, id uuid.UUID) ([]*Task, error)

	// ListEvents returns the events of a run in the order they happened, or
	// ErrRunNotFound.
	ListEvents(ctx context.Context, id uuid.UUID) ([]*Event, error)

	// ListRuns returns a page of runs matching the params' filter, newest
	// first (by creation time, then ID), after the params' cursor.
	ListRuns(ctx context.Context, p *ListRunsParams) (*ListRunsResult, error)

	// CancelRuns cancels runs, each in one atomic unit (see dag.Run.Cancel):
	// a run not settled becomes CANCELLED with every unfinished task, and
	// the claims of its running tasks stop being current. The results say,
	// per run, what happened (ErrRunNotFound, ErrRunSettled, or nil).
	CancelRuns(ctx context.Context, p *CancelRunsParams) ([]RunActionResult, error)

	// ReplayRuns makes settled runs run again (see dag.Run.Replay), each in
	// one atomic unit. The results say, per run, what happened.
	ReplayRuns(ctx context.Context, p *ReplayRunsParams) ([]RunActionResult, error)

	// Stats counts the tasks and runs of every workflow and tenant, at a
	// cost that does not grow with the number of settled runs.
	Stats(ctx context.Context, p *StatsParams) (*Stats, error)

	// PruneRuns deletes up to Limit settled runs that finished (and were
	// created: the two differ only when clocks do) more than OlderThan ago,
	// oldest created first (dag.Expired, dag.PruneOrder), with their tasks
	// and events, in one short atomic unit; runs in transitions at that
	// moment are left for the next call. It reports
	// how many it deleted; fewer than Limit means none is left, and then the
	// counts of runs that settled before the cutoff (Stats) go too.
	PruneRuns(ctx context.Context, p *PruneRunsParams) (*PruneRunsResult, error)

	// SendEvents records events, each for one tenant and key, in one atomic
	// unit, and delivers each to every task of its tenant waiting for its
	// key at that moment (see dag.Run.Deliver): a waiting task receives
	// the first event sent while it waits, exactly once. Events are kept
	// (PruneEvents), so that a wait that begins later receives the first
	// one sent within its lookback (StepSpec.Wait.Lookback).
	SendEvents(ctx context.Context, p *SendEventsParams) (*SendEventsResult, error)

	// Signal sends a signal to one run: every task of the run waiting for
	// a signal of that name receives it, and it is kept with the run, so
	// that a wait for it that begins later receives it too. It fails with
	// ErrRunNotFound, or ErrRunSettled for a run that has settled.
	Signal(ctx context.Context, p *SignalParams) (*SignalResult, error)

	// ApplyInbox applies the messages that transitions left for other
	// runs and that are still pending: the settlement of a child run for
	// the task waiting for it, the cancellation of a child run whose
	// parent gave it up, an event for a waiting task. A store applies the
	// messages of its own calls before they return; what a process that
	// died left, or a caller's transaction committed (SendEventsTx), waits
	// for this call, which the leader makes when notified (TopicInbox) and
	// periodically.
	ApplyInbox(ctx context.Context, p *ApplyInboxParams) (*ApplyInboxResult, error)

	// PruneEvents deletes up to Limit events sent more than OlderThan ago.
	// (Signals go with their run.)
	PruneEvents(ctx context.Context, p *PruneEventsParams) (*PruneEventsResult, error)
}

// TxSender is implemented by stores that can send events inside a
// transaction the caller controls (pgx.Tx for pgstore): the events are
// sent if and only if the transaction commits, and delivered by the
// engines once it has (TopicInbox).
type TxSender interface {
	SendEventsTx(ctx context.Context, tx any, p *SendEventsParams) (*SendEventsResult, error)
}

// Listener is implemented by stores that push notifications, so that
// engines react to new work at once instead of waiting for their next poll.
type Listener interface {
	// Listen delivers notifications until ctx is done. After it connects (and
	// after every reconnect, when notifications may have been missed) it
	// delivers a TopicResync notification. deliver must not block.
	Listen(ctx context.Context, deliver func(Notification)) error
}

// Elector is implemented by stores that elect one leader among the engines
// sharing them. Leader duties (firing timers, rescuing dead tasks) are safe to
// run twice at once, since every transition is atomic and conditional;
// leadership only avoids the duplicated work.
type Elector interface {
	// Lead blocks until ctx is done. Whenever the caller becomes leader it
	// calls lead with a context that is cancelled when leadership is lost;
	// lead must return soon after its context is cancelled.
	Lead(ctx context.Context, id string, lead func(ctx context.Context)) error
}

// TxCreator is implemented by stores that can create runs inside a
// transaction the caller controls (pgx.Tx for pgstore), so that saving an
// order and starting its workflow commit or roll back together.
type TxCreator interface {
	CreateRunsTx(ctx context.Context, tx any, p *CreateRunsParams) (*CreateRunsResult, error)
}

// Checker is implemented by stores that can tell whether they are ready to
// serve engines: for pgstore, that its schema exists and is migrated to the
// version the code expects. Engine.Start calls Check and fails with its
// error, so that a missing or outdated schema is one clear error at start
// instead of a claim error repeated forever.
type Checker interface {
	Check(ctx context.Context) error
}

// Clocked is implemented by stores that keep time themselves and are
// shared between processes (pgstore: PostgreSQL's clock). Every timestamp
// such a store compares with another (claims, heartbeats, due times,
// deadness) must come from that one clock, so engines refuse a Config.Clock
// for it: an engine whose clock runs ahead would rescue live steps and fire
// timers early. The params' Now fields remain for tests of the store itself.
type Clocked interface {
	// KeepsTime reports whether the store keeps its own clock.
	KeepsTime() bool
}

// Topic names a kind of notification.
type Topic string

const (
	// TopicReady: tasks were enqueued; idle workers should claim.
	TopicReady Topic = "ready"
	// TopicTimer: a timer was created; the leader should re-check when the
	// next one is due.
	TopicTimer Topic = "timer"
	// TopicRun: a run settled; the payload is its ID.
	TopicRun Topic = "run"
	// TopicResync: notifications may have been lost; re-check everything.
	TopicResync Topic = "resync"
	// TopicCancel: a run was cancelled; the payload is its ID. Engines
	// cancel the steps they run for it at once rather than at their next
	// heartbeat.
	TopicCancel Topic = "cancel"
	// TopicInbox: messages for runs are pending (a caller's transaction
	// sent events, or a process died before applying what its transition
	// left): the leader applies them (Store.ApplyInbox).
	TopicInbox Topic = "inbox"
)

// Notification is one message from a Listener.
type Notification struct {
	// Topic says what happened.
	Topic Topic
	// Payload is the topic's detail (e.g. a run ID), or empty.
	Payload string
}

// RunStatus is the status of a run.
type RunStatus string

// Run statuses: RUNNING until the run completes, fails or is cancelled.
const (
	RunRunning   RunStatus = "RUNNING"
	RunCompleted RunStatus = "COMPLETED"
	RunFailed    RunStatus = "FAILED"
	RunCancelled RunStatus = "CANCELLED"
)

// RunStatuses lists every run status, in the order lists and tables show
// them.
var RunStatuses = []RunStatus{RunRunning, RunCompleted, RunFailed, RunCancelled}

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
)

// OnFailureTask is the task name of a run's on-failure handler. Step names
// cannot contain '@', so it never collides with a step.
const OnFailureTask = "@on_failure"

// EventType is the kind of an event in a run's log.
type EventType string

// Event types, one per kind of transition of a task.
const (
	EventQueued    EventType = "QUEUED"
	EventStarted   EventType = "STARTED"
	EventCompleted EventType = "COMPLETED"
	EventFailed    EventType = "FAILED"
	EventRetrying  EventType = "RETRYING"
	EventSkipped   EventType = "SKIPPED"
	EventSleeping  EventType = "SLEEPING"
	EventWoken     EventType = "WOKEN"
	EventCancelled EventType = "CANCELLED"
	// EventReplayed: a replay reset the task to run again; the detail says
	// which replay.
	EventReplayed EventType = "REPLAYED"
	// EventWaiting: the task began waiting; the detail says for what (an
	// event key, a signal, a child run, a map's items).
	EventWaiting EventType = "WAITING"
	// EventUpgraded: the task's run moved to another version of its
	// workflow (a task added by that version, or one not finished when it
	// moved); the detail names both versions.
	EventUpgraded EventType = "UPGRADED"
)

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
	// each item of a parent's list, one task per item.
	Map *MapSpec `json:"map,omitempty"`
}

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
	// Over is the parent whose output is the list of items.
	Over string `json:"over"`
}

// RateLimit is a rate limit recorded for a step: at most N admissions to
// the ready queue per key in each window of length Per, windows aligned to
// multiples of Per since the Unix epoch.
type RateLimit struct {
	N   int           `json:"n"`
	Per time.Duration `json:"per"`
}

// TaskKeys are the keys computed for one step of a new run. An empty key
// means the step's cap or limit does not apply to this task.
type TaskKeys struct {
	// Concurrency is the concurrency key (see StepSpec.Concurrency).
	Concurrency string
	// Rate is the rate-limit key (see StepSpec.Rate).
	Rate string
}

// OnFailureSpec describes a workflow's on-failure handler.
type OnFailureSpec struct {
	Retry RetryPolicy `json:"retry"`
}

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

// NewRun is one run to create.
type NewRun struct {
	ID       uuid.UUID
	Workflow string
	Tenant   string
	Input    []byte
	Shape    *Shape
	// IdempotencyKey, when set, makes the run unique per workflow and
	// tenant: creating another run with the same key reports the first as a
	// duplicate for as long as it is kept (retention). 1-255 bytes of UTF-8
	// without control characters.
	IdempotencyKey string
	// StartAt, when after the creation time, holds the run's root tasks
	// until then: they wait as timers (QUEUED with a due time) and become
	// ready when the leader fires them.
	StartAt time.Time
	// StartAfter, when positive, holds the root tasks until that long
	// after the creation time (the later of it and StartAt wins).
	StartAfter time.Duration
	// Deadline, when set, is when the run fails if it has not settled: its
	// unfinished tasks are cancelled (see dag.Run.Expire).
	Deadline time.Time
	// Timeout, when positive, sets the deadline that long after the
	// creation time (the earlier of it and Deadline wins).
	Timeout time.Duration
	// Priority orders the run's tasks within its tenant's queue: higher
	// first, between PriorityMin and PriorityMax (0 is the default).
	Priority int
	// Keys, when set, holds the keys of each step, in shape order (one
	// entry per step). Nil when no step of the shape has a concurrency cap
	// or a rate limit.
	Keys []TaskKeys
	// Parent, set for a child run (dag.Run.Finish sets it when a child
	// step starts one), links it to the task waiting for it.
	Parent *ParentRef
	// TraceParent, when set, is the W3C traceparent of the span that
	// triggered the run (for a child run, of its parent's step attempt):
	// the engines executing the run's steps parent their spans on it.
	// Stored as given; empty (most runs) stores nothing.
	TraceParent string
}

// ParentRef links a child run to its parent: the task of the parent run
// that started it, and the child's step whose output is its result.
type ParentRef struct {
	RunID uuid.UUID
	Step  string
	// Result is the child's step whose output the parent's task receives.
	Result string
}

// Priorities of runs: a tenant's ready tasks of a higher priority are
// claimed before its tasks of a lower one; fairness between tenants is not
// affected.
const (
	PriorityMin = 0
	PriorityMax = 3
)

// CreateRunsParams are the parameters of Store.CreateRuns.
type CreateRunsParams struct {
	Now  time.Time
	Runs []NewRun
}

// CreateRunsResult is the result of Store.CreateRuns.
type CreateRunsResult struct {
	// Runs has one entry per new run, in order.
	Runs []CreatedRun
}

// CreatedRun is what CreateRuns did with one new run.
type CreatedRun struct {
	// ID is the run's ID: the new run's, or the recorded run's for a
	// duplicate.
	ID uuid.UUID
	// Duplicate is set when the run was not created because it duplicates
	// a recorded one (or one earlier in the call).
	Duplicate bool
}

// ClaimTasksParams are the parameters of Store.ClaimTasks.
type ClaimTasksParams struct {
	Now      time.Time
	WorkerID string
	// Limit is the most tasks to claim.
	Limit int
	// Workflows lists the workflows this worker can run.
	Workflows []string
	// Queues, when not nil, narrows Workflows to the versions this worker
	// serves: a task is claimed only if dag.Queue(workflow, version) of
	// its run is listed (a run recorded before versions has version "").
	// Nil claims every version of Workflows.
	Queues []string
	// TenantLimit, when positive, caps the RUNNING tasks of one tenant across
	// all workers; ready tasks of a tenant at its cap are left queued.
	TenantLimit int
}

// ClaimedTask is a task claimed for execution, with what is needed to run it.
type ClaimedTask struct {
	RunID    uuid.UUID
	Workflow string
	// Version is the version the task's run is pinned to (Run.Version).
	Version string
	Tenant  string
	Step    string
	Kind    TaskKind
	Attempt int
	// Token identifies this claim; outcomes and heartbeats must present it.
	Token int64
	Retry RetryPolicy
	// Timeout bounds the attempt (StepSpec.Timeout; 0: none), counted from
	// the claim.
	Timeout time.Duration
	Input   []byte
	// ParentOutputs holds the outputs of the parents that COMPLETED, by
	// name. A skipped parent is absent. A map step's output is the list
	// of its items' outputs, in ParentItems instead.
	ParentOutputs map[string][]byte
	// ParentItems holds, for each parent that is a map step and
	// COMPLETED, its items' outputs in item order.
	ParentItems map[string][][]byte
	// Map and Item name the map step and the item of a KindItem task;
	// Input is then the item's input (not the run's).
	Map  string
	Item int
	// FailedStep and Error describe the run's failure; set for KindOnFailure.
	FailedStep string
	Error      string
	// ReadyAt is when the task became ready (claimable), and ClaimedAt
	// when this claim took it, both on the store's clock: the difference is
	// how long it waited in the queue. ReadyAt is zero if unknown.
	ReadyAt, ClaimedAt time.Time
	// TraceParent is the run's NewRun.TraceParent, read with the claim.
	TraceParent string
}

// Ref returns the claim's TaskRef.
func (c *ClaimedTask) Ref() TaskRef {
	return TaskRef{RunID: c.RunID, Step: c.Step, Token: c.Token}
}

// TaskRef names one claim of one task.
type TaskRef struct {
	RunID uuid.UUID
	Step  string
	Token int64
}

// OutcomeKind is what happened to a claimed task.
type OutcomeKind int

const (
	// OutcomeComplete: the step returned an output.
	OutcomeComplete OutcomeKind = iota + 1
	// OutcomeFail: the step returned an error; retried while attempts remain
	// unless Terminal.
	OutcomeFail
	// OutcomeSkip: a skip condition of the step fired.
	OutcomeSkip
	// OutcomeRelease: the worker gave the task back without running it to
	// the end (shutdown); the attempt does not count.
	OutcomeRelease
	// OutcomeWait: a KindEvent task waits for the event with key Key (or
	// for its signal).
	OutcomeWait
	// OutcomeSpawn: a KindChild task starts Child as its child run and
	// waits for it.
	OutcomeSpawn
	// OutcomeFanOut: a KindMap task splits into Items, one task each, and
	// waits for them.
	OutcomeFanOut
)

// Outcome is the result of one claimed task.
type Outcome struct {
	Task TaskRef
	Kind OutcomeKind
	// Output is the encoded output (OutcomeComplete).
	Output []byte
	// Error is the error message (OutcomeFail); Reason why it was skipped
	// (OutcomeSkip).
	Error  string
	Reason string
	// Terminal marks a failure that must not be retried.
	Terminal bool
	// Rand is a random number in [0, 1) used for retry jitter.
	Rand float64
	// Key is the event key of OutcomeWait.
	Key string
	// Child is the run to start (OutcomeSpawn): its workflow, input,
	// shape and keys; the store fills in its ID, tenant, priority and
	// parent (dag.Run.Finish).
	Child *NewRun
	// Items are the encoded inputs of the items of OutcomeFanOut.
	Items [][]byte
}

// FinishTasksParams are the parameters of Store.FinishTasks.
type FinishTasksParams struct {
	Now      time.Time
	Outcomes []Outcome
}

// FinishStatus tells what FinishTasks did with one outcome.
type FinishStatus int

const (
	// FinishApplied: the outcome was recorded.
	FinishApplied FinishStatus = iota + 1
	// FinishDuplicate: this claim's outcome had already been recorded.
	FinishDuplicate
	// FinishStale: the claim is no longer current (the task was rescued,
	// released or cancelled); nothing changed.
	FinishStale
)

// String returns the status's name, e.g. "applied".
func (s FinishStatus) String() string {
	switch s {
	case FinishApplied:
		return "applied"
	case FinishDuplicate:
		return "duplicate"
	case FinishStale:
		return "stale"
	}
	return "unknown"
}

// FinishResult is the result of one outcome, in the order of the outcomes.
type FinishResult struct {
	Status FinishStatus
	// Retried is set when the outcome was an applied failure whose task
	// will be attempted again (after its backoff).
	Retried bool
	// Settled is the status of the run when this outcome settled it; empty
	// otherwise.
	Settled RunStatus
	// Cascade, set on the first result of a call only, lists the other
	// runs the call settled: those settled by the messages its outcomes
	// left for other runs (a parent its child's settlement completed or
	// failed, a child run cancelled with its failed parent), applied
	// before the call returned. The runs the outcomes settled themselves
	// are reported by Settled, never here.
	Cascade []SettledRun
}

// SettledRun is a run that a store call settled (see dag.Run.Settlement):
// each settlement is reported once, by the call that recorded it (a
// replayed run that settles again is reported again).
type SettledRun struct {
	RunID    uuid.UUID
	Workflow string
	Tenant   string
	// Status is the run's status once settled: COMPLETED, FAILED or
	// CANCELLED.
	Status RunStatus
}

// HeartbeatParams are the parameters of Store.Heartbeat.
type HeartbeatParams struct {
	Now time.Time
	// WorkerID names the worker, for diagnostics.
	WorkerID string
	// Tasks are the claims the worker holds and vouches for.
	Tasks []TaskRef
}

// HeartbeatResult is the result of Store.Heartbeat.
type HeartbeatResult struct {
	// Lost lists claims that are no longer current, or whose run is no
	// longer running; the worker should stop working on them.
	Lost []TaskRef
	// Cancelled lists the claims of Lost whose run was cancelled (or gave
	// the task up: a deadline).
	Cancelled []TaskRef
	// TimedOut lists the claims of Lost whose attempt ran past its timeout.
	TimedOut []TaskRef
}

// FireTimersParams are the parameters of Store.FireTimers.
type FireTimersParams struct {
	Now time.Time
	// Limit is the most timers to fire in one call.
	Limit int
	// Rand is a random number in [0, 1) used for the retry jitter of
	// attempts that timed out.
	Rand float64
}

// FireTimersResult is the result of Store.FireTimers.
type FireTimersResult struct {
	Fired int
	// Next is the time until the next pending timer is due, measured on the
	// store's clock; meaningful only when HasNext.
	Next    time.Duration
	HasNext bool
	// Settled lists the runs the call settled (a run past its deadline, a
	// step timed out for good), in the order they settled.
	Settled []SettledRun
}

// RescueTasksParams are the parameters of Store.RescueTasks.
type RescueTasksParams struct {
	Now time.Time
	// DeadAfter is how long a RUNNING task may go without a heartbeat (or,
	// before its first, since its claim) before it is considered dead.
	DeadAfter time.Duration
	Limit     int
	// Rand is a random number in [0, 1) used for retry jitter.
	Rand float64
}

// RescueTasksResult is the result of Store.RescueTasks.
type RescueTasksResult struct {
	Rescued []TaskRef
	// Workflows holds the workflow of each rescued task, in the order of
	// Rescued.
	Workflows []string
	// Settled lists the runs the call settled (a rescued task out of
	// attempts, and the runs settled by the pending messages it applied).
	Settled []SettledRun
}

// Run is a stored run.
type Run struct {
	ID       uuid.UUID
	Workflow string
	// Version is the version of the workflow the run is pinned to
	// (Shape.Version); empty for a run recorded before versions.
	Version string
	Tenant  string
	Status  RunStatus
	Input   []byte
	// FailedStep and Error describe the failure that failed the run; Error
	// is the reason of a cancelled run.
	FailedStep string
	Error      string
	// Shape is the run's DAG; set by GetRun.
	Shape *Shape
	// IdempotencyKey is the key the run was created with, if any.
	IdempotencyKey string
	// Priority is the run's priority (PriorityMin to PriorityMax).
	Priority int
	// Deadline, when set, is when the run fails if it has not settled. It
	// is cleared when the run settles (a replayed run has none).
	Deadline time.Time
	// Parent links a child run to its parent; nil for other runs.
	Parent *ParentRef
	// TraceParent is the W3C traceparent the run was created with
	// (NewRun.TraceParent), empty if none.
	TraceParent string
	CreatedAt   time.Time
	// FinishedAt is set once the run has settled: every task is terminal,
	// the on-failure handler included.
	FinishedAt time.Time
}

// Settled reports whether the run is finished and nothing more will happen.
func (r *Run) Settled() bool { return !r.FinishedAt.IsZero() }

// Task is a stored task.
type Task struct {
	RunID   uuid.UUID
	Name    string
	Kind    TaskKind
	State   TaskState
	Attempt int
	// Token is the current claim's token (RUNNING), or the token of the
	// claim that finished the task.
	Token  int64
	Worker string
	// DueAt is when a SLEEPING task wakes, or when a QUEUED task waiting out
	// a retry backoff becomes ready; zero otherwise.
	DueAt time.Time
	// HeartbeatAt is the last heartbeat of the current claim of a RUNNING
	// task; zero before the first.
	HeartbeatAt time.Time
	// TimeoutAt is when a ready task fails for want of a worker
	// (StepSpec.QueueTimeout), or when a RUNNING attempt fails for running
	// too long (StepSpec.Timeout); zero otherwise.
	TimeoutAt  time.Time
	Output     []byte
	Error      string
	StartedAt  time.Time
	FinishedAt time.Time
	// ConcurrencyKey and RateKey are the task's keys, fixed when the run
	// was created; empty when its step has no cap or limit.
	ConcurrencyKey string
	RateKey        string
	// WaitKey is what a KindEvent task waits for, or waited for last: an
	// event key, or a signal's name marked by dag.SignalKey.
	WaitKey string
	// Child is the child run a KindChild task started last; it waits for
	// it while WAITING.
	Child uuid.UUID
	// Items counts the items of a KindMap task that fanned out, and Left
	// those not COMPLETED yet.
	Items, Left int
	// Item and Input are the number and input of a KindItem task.
	Item  int
	Input []byte
}

// Event is one entry of a run's event log.
type Event struct {
	ID      int64
	RunID   uuid.UUID
	Step    string
	Type    EventType
	Attempt int
	At      time.Time
	// Detail is the error of a FAILED or RETRYING event, or the reason of a
	// SKIPPED, CANCELLED or QUEUED one.
	Detail string
	// DueAt is the wake-up time of a SLEEPING event and the next attempt's
	// time of a RETRYING one.
	DueAt time.Time
}

// RunFilter selects runs. Zero fields do not filter.
type RunFilter struct {
	// Tenant keeps the runs of one tenant.
	Tenant string
	// Workflow keeps the runs of one workflow.
	Workflow string
	// Version keeps the runs pinned to one version (Run.Version).
	Version string
	// Statuses keeps the runs whose status is one of these.
	Statuses []RunStatus
	// CreatedAfter and CreatedBefore bound the creation time: after (or
	// at) the first, before the second.
	CreatedAfter, CreatedBefore time.Time
	// FinishedAfter and FinishedBefore bound the time the run settled;
	// either keeps only settled runs.
	FinishedAfter, FinishedBefore time.Time
	// Parent keeps the child runs of one run.
	Parent uuid.UUID
}

// RunKey is the position of a run in the newest-first order of ListRuns.
type RunKey struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// ListRunsParams are the parameters of Store.ListRuns.
type ListRunsParams struct {
	Filter RunFilter
	// After, when set, starts the page after that run (the last of the
	// previous page).
	After *RunKey
	// Limit is the most runs to return (at least 1).
	Limit int
}

// RunSummary is a run as a list shows it.
type RunSummary struct {
	ID         uuid.UUID
	Workflow   string
	Version    string
	Tenant     string
	Status     RunStatus
	FailedStep string
	Error      string
	CreatedAt  time.Time
	FinishedAt time.Time
	// ParentID and ParentStep link a child run to its parent.
	ParentID   uuid.UUID
	ParentStep string
}

// ListRunsResult is the result of Store.ListRuns.
type ListRunsResult struct {
	Runs []RunSummary
	// More is set when runs match after the last one returned.
	More bool
}

// CancelRunsParams are the parameters of Store.CancelRuns.
type CancelRunsParams struct {
	Now time.Time
	IDs []uuid.UUID
	// Tenant, when set, restricts the call to that tenant's runs: another
	// tenant's run is reported ErrRunNotFound.
	Tenant string
	// Reason is recorded as the run's error and in its events.
	Reason string
}

// ReplayRunsParams are the parameters of Store.ReplayRuns.
type ReplayRunsParams struct {
	Now time.Time
	IDs []uuid.UUID
	// Tenant, when set, restricts the call to that tenant's runs.
	Tenant string
	// FromStep, when set, runs that step and all its descendants again even
	// if they completed.
	FromStep string
}

// RunActionResult is what a cancel or a replay did to one run, in the
// order of the IDs: Err is nil when it was applied, else ErrRunNotFound,
// ErrRunSettled, ErrRunNotSettled, ErrNothingToReplay or ErrStepNotFound.
type RunActionResult struct {
	ID  uuid.UUID
	Err error
	// Settled, set on the first result of a call only, lists the runs the
	// call settled: the runs it cancelled, and the runs settled by the
	// messages those left (their child runs, cancelled with them).
	Settled []SettledRun
}

// StatsParams are the parameters of Store.Stats.
type StatsParams struct {
	Now time.Time
	// Tenant, when set, counts only that tenant's tasks and runs.
	Tenant string
	// Window is how far back settled runs are counted, by the minute they
	// settled in: the minute that holds Now-Window and every later one
	// (see dag.Counted).
	Window time.Duration
}

// Stats counts tasks and runs by workflow and tenant.
type Stats struct {
	// Queues has one entry per workflow and tenant with tasks ready,
	// waiting or running.
	Queues []QueueStats
	// Runs has one entry per workflow, tenant and status of the runs in
	// flight (RUNNING, or FAILED while steps or the on-failure handler
	// still run), and one per workflow, tenant and status of the runs that
	// settled within the window. A run replayed and settled again is
	// counted at each settlement.
	Runs []RunCount
}

// QueueStats counts the unfinished tasks of one workflow and tenant.
type QueueStats struct {
	Workflow string
	// Version is the version of the runs the tasks belong to.
	Version string
	Tenant  string
	// Ready counts the tasks claimable now.
	Ready int
	// Waiting counts the tasks waiting for a timer (retry backoffs, sleeps,
	// rate limits, wait timeouts), parked behind a concurrency key, or
	// WAITING for an event, a signal, a child run or a map step's items.
	Waiting int
	// Running counts the tasks claimed and running.
	Running int
	// OldestReady is when the longest-waiting ready task became ready;
	// zero when none is.
	OldestReady time.Time
}

// RunCount counts the runs of one workflow, tenant and status.
type RunCount struct {
	Workflow string
	// Version is the version the runs in flight are pinned to; empty for
	// counts of settled runs, which are counted by workflow only.
	Version string
	Tenant  string
	Status  RunStatus
	// Settled tells counts of runs that settled within the window from
	// counts of runs in flight.
	Settled bool
	Count   int
}

// PruneRunsParams are the parameters of Store.PruneRuns.
type PruneRunsParams struct {
	Now time.Time
	// OlderThan: runs that settled more than this long before Now are
	// deleted. The cutoff is taken on the store's clock.
	OlderThan time.Duration
	// Limit is the most runs deleted in one call.
	Limit int
}

// PruneRunsResult is the result of Store.PruneRuns.
type PruneRunsResult struct {
	Deleted int
}

// EventMessage is one event to send.
type EventMessage struct {
	// Tenant and Key say which waiting tasks receive it: those of the
	// tenant's runs waiting for an event with that key. Key is 1-255 bytes
	// of UTF-8 without control characters (dag.ValidEventKey).
	Tenant string
	Key    string
	// Payload is the encoded payload: the output of the tasks receiving it.
	Payload []byte
}

// SendEventsParams are the parameters of Store.SendEvents.
type SendEventsParams struct {
	Now    time.Time
	Events []EventMessage
}

// SendEventsResult is the result of Store.SendEvents.
type SendEventsResult struct {
	// Delivered counts, for each event, the waiting tasks it was delivered
	// to. Inside a caller's transaction (SendEventsTx) delivery happens
	// after the commit and the counts are those of the tasks waiting when
	// the event was recorded.
	Delivered []int
	// Settled lists the runs the delivered events settled (and the runs
	// settled in turn: a parent its child's settlement completed). Inside
	// a caller's transaction nothing is delivered, and nothing settles.
	Settled []SettledRun
}

// SignalParams are the parameters of Store.Signal.
type SignalParams struct {
	Now   time.Time
	RunID uuid.UUID
	// Tenant, when set, restricts the call to that tenant's runs.
	Tenant string
	// Name is the signal's name (dag.ValidEventKey).
	Name    string
	Payload []byte
}

// SignalResult is the result of Store.Signal.
type SignalResult struct {
	// Settled lists the runs the signal settled: its run, when the step
	// that received it was the last to finish, and the runs settled in
	// turn (its parent, if a child run).
	Settled []SettledRun
}

// ApplyInboxParams are the parameters of Store.ApplyInbox.
type ApplyInboxParams struct {
	Now time.Time
	// Limit is the most runs whose messages are applied in one call.
	Limit int
}

// ApplyInboxResult is the result of Store.ApplyInbox.
type ApplyInboxResult struct {
	// Applied counts the messages taken (whether or not their task still
	// waited for them).
	Applied int
	// Settled lists the runs the messages applied settled.
	Settled []SettledRun
}

// PruneEventsParams are the parameters of Store.PruneEvents.
type PruneEventsParams struct {
	Now       time.Time
	OlderThan time.Duration
	Limit     int
}

// PruneEventsResult is the result of Store.PruneEvents.
type PruneEventsResult struct {
	Deleted int
}

var (
	// ErrRunNotFound is returned for an unknown run ID.
	ErrRunNotFound = errors.New("durable/store: run not found")
	// ErrRunExists is returned when creating a run whose ID is taken.
	ErrRunExists = errors.New("durable/store: run already exists")
	// ErrTooManyTenants is returned when the fair queue has no group left
	// for a new tenant.
	ErrTooManyTenants = errors.New("durable/store: too many tenants for the fair queue")
	// ErrInvalidTenant is returned when creating a run whose tenant ID is
	// not 1-200 bytes of UTF-8 without control characters.
	ErrInvalidTenant = errors.New("durable: invalid tenant id")
	// ErrInvalidRun is returned when creating a run the store cannot record
	// as given: an invalid workflow name or shape.
	ErrInvalidRun = errors.New("durable/store: invalid run")
	// ErrInvalidOutcome is returned by FinishTasks, which then applies
	// nothing, when an outcome has an unknown kind.
	ErrInvalidOutcome = errors.New("durable/store: invalid outcome")
	// ErrRunSettled is the result of cancelling a run that has settled.
	ErrRunSettled = errors.New("durable: run has settled")
	// ErrRunNotSettled is the result of replaying a run that has not
	// settled: it still runs (or a concurrent replay won).
	ErrRunNotSettled = errors.New("durable: run has not settled")
	// ErrNothingToReplay is the result of replaying a completed run
	// without a step to replay from.
	ErrNothingToReplay = errors.New("durable: nothing to replay: the run completed")
	// ErrStepNotFound: a replay names a step that is not in the run's shape.
	ErrStepNotFound = errors.New("durable: no such step in the run")
	// ErrVersionMismatch: an upgrade found the run at another version than
	// the one it was asked to move runs from.
	ErrVersionMismatch = errors.New("durable: the run is not at that version")
	// ErrIncompatible: a run cannot move to a version, or a definition
	// cannot accept runs of a version, because a step it has not finished
	// is missing or different there; the error names the step.
	ErrIncompatible = errors.New("durable: incompatible versions")
	// ErrInvalidKey is returned when creating a run whose concurrency or
	// rate-limit keys are invalid (see flow.ValidKey) or do not match its
	// shape.
	ErrInvalidKey = errors.New("durable: invalid concurrency or rate-limit key")
	// ErrInvalidEvent is returned when sending an event or a signal whose
	// tenant, key or name is invalid.
	ErrInvalidEvent = errors.New("durable: invalid event")
	// ErrTransient marks an error that may pass if the call is tried again:
	// the connection was lost, the server is restarting, a transaction lost
	// a serialization race. The call may or may not have taken effect;
	// trying it again is safe, since every transition is conditional (an
	// outcome replayed after it was recorded is reported FinishDuplicate).
	// Stores wrap such errors so that errors.Is(err, ErrTransient) holds;
	// any other error means the call as given will fail again.
	ErrTransient = errors.New("durable/store: transient error")
)

// Transient wraps err so that it matches ErrTransient; nil stays nil.
func Transient(err error) error {
	if err == nil || errors.Is(err, ErrTransient) {
		return err
	}
	return &transientError{err}
}

type transientError struct{ err error }

func (e *transientError) Error() string        { return e.err.Error() }
func (e *transientError) Unwrap() error        { return e.err }
func (e *transientError) Is(target error) bool { return target == ErrTransient }

// Versioner is implemented by stores that can move runs from one version
// of their workflow to another and list the versions they recorded. Both
// stores of the module implement it.
type Versioner interface {
	// UpgradeRuns moves runs to another version of their workflow, each in
	// one atomic unit (see dag.Run.Upgrade): the run's shape becomes To
	// merged with what it has done, and its tasks are claimed by the
	// engines serving To from then on. The results say, per run, what
	// happened: nil, ErrRunNotFound, ErrRunSettled, ErrVersionMismatch (the
	// run is not at From) or an error matching ErrIncompatible that names
	// the step at fault.
	UpgradeRuns(ctx context.Context, p *UpgradeRunsParams) ([]RunActionResult, error)

	// ListVersions returns the versions of workflows recorded with runs
	// (a shape is kept while a run uses it, and an hour after), each with
	// its shape, ordered by workflow, then newest first.
	ListVersions(ctx context.Context, p *ListVersionsParams) (*ListVersionsResult, error)
}

// UpgradeRunsParams are the parameters of Versioner.UpgradeRuns.
type UpgradeRunsParams struct {
	Now time.Time
	IDs []uuid.UUID
	// Tenant, when set, restricts the call to that tenant's runs.
	Tenant string
	// From is the version the runs must be at; a run at another version is
	// reported ErrVersionMismatch and left alone.
	From string
	// To is the shape of the version to move to, with its Version set.
	To *Shape
}

// ListVersionsParams are the parameters of Versioner.ListVersions.
type ListVersionsParams struct {
	// Workflow, when set, lists only that workflow's versions.
	Workflow string
}

// ListVersionsResult is the result of Versioner.ListVersions.
type ListVersionsResult struct {
	Versions []VersionRecord
}

// VersionRecord is one version of a workflow as a store recorded it.
type VersionRecord struct {
	Workflow string
	Version  string
	// Shape is the version's shape as last recorded.
	Shape *Shape
	// RecordedAt is when a run first recorded that shape.
	RecordedAt time.Time
}
