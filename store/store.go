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
//
// The vocabulary the port shares with users and the CLI (run statuses,
// task states and kinds, events, shapes, stats, schedules and errors) is
// package durabletype, a leaf that store imports; what is here is what
// only drivers see.
//
// The port is not for implementation outside this repository. It changes
// without notice, whenever the engine needs it to (a new operator action
// or transition reshapes it), and only the module's own drivers follow it.
// Use memstore or pgstore; to observe or wrap one in tests, embed it.
package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
)

// Store is the set of transitions and reads the engine needs. It is not
// for implementation outside this repository: methods are added and
// changed without notice (see the package doc); use memstore or pgstore.
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
	ListEvents(ctx context.Context, id uuid.UUID) ([]*durabletype.Event, error)

	// ListRuns returns a page of runs matching the params' filter, newest
	// first (by creation time, then ID), after the params' cursor.
	ListRuns(ctx context.Context, p *ListRunsParams) (*ListRunsResult, error)

	// ActOnRuns applies an operator's action (Action: cancel, replay,
	// upgrade; see durabletype.RunAction) to the runs IDs names, and
	// reports per run, in the order of the IDs, what happened. Which runs
	// it applies to and how is the core's (dag.Change.Act): a run not found
	// (or another tenant's) is ErrRunNotFound, one at another Version is
	// ErrVersionMismatch, one whose status does not allow the action is
	// refused (ErrRunSettled, ErrRunNotSettled), and the others go through
	// the action's transition (dag.Run.Cancel, Replay, Upgrade), which may
	// refuse them for reasons of its own. A driver locks and loads the
	// runs and writes the change; it decides nothing.
	//
	// The whole call is one atomic unit: every run it changes is changed,
	// or none (callers keep calls small: the engine acts on at most 100
	// runs per call). What the changed runs leave for other runs (a
	// cancelled parent's child runs, cancelled with it) is applied after
	// the commit, each run's in an atomic unit of its own, as for every
	// transition.
	ActOnRuns(ctx context.Context, p *ActOnRunsParams) ([]RunActionResult, error)

	// Stats counts the tasks and runs of every workflow and tenant, at a
	// cost that does not grow with the number of settled runs.
	Stats(ctx context.Context, p *StatsParams) (*durabletype.Stats, error)

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
	// delivers a TopicResync notification, and TopicDeaf when it loses its
	// connection. A store that cannot listen (behind a transaction pooler)
	// never delivers TopicResync: engines then poll. deliver must not
	// block.
	Listen(ctx context.Context, deliver func(Notification)) error
}

// Elector is implemented by stores that elect one leader among the engines
// sharing them. Each leadership has a term, a number that grows with every
// new leader (the fencing token): the context Lead passes to lead carries
// it (WithTerm), so the leader-only writes the leader makes with that
// context are refused (durabletype.ErrNotLeader) once another leadership
// began. Leader duties are also safe to run twice at once, since every
// transition is atomic and conditional; the term makes sure a leader that
// lost its leadership (it froze, or was cut off) applies nothing after the
// next one took over.
type Elector interface {
	// Lead blocks until ctx is done. Whenever the caller becomes leader it
	// calls lead with a context that carries the leadership's term
	// (TermOf) and is cancelled when leadership is lost; lead must return
	// soon after its context is cancelled. When ctx is done, Lead waits
	// for lead to return, then gives the leadership up at once (the next
	// leader need not wait for it to expire) and returns ctx.Err().
	Lead(ctx context.Context, id string, lead func(ctx context.Context)) error
}

// TxCreator is implemented by stores that can create runs inside a
// transaction the caller controls (pgx.Tx for pgstore), so that saving an
// order and starting its workflow commit or roll back together.
type TxCreator interface {
	CreateRunsTx(ctx context.Context, tx any, p *CreateRunsParams) (*CreateRunsResult, error)
}

// TxFinisher is implemented by stores that can record a step's outcome in
// the transaction its code wrote in (durable.TxStep), so that the step's
// writes and its recorded outcome commit together or not at all.
type TxFinisher interface {
	// FinishTx begins a transaction and calls fn with it (a pgx.Tx for
	// pgstore, a *memstore.Tx in memory). When fn returns record set,
	// FinishTx records the outcome it returns in that transaction, as
	// FinishTasks would record it alone, and commits if and only if it was
	// applied: fn's writes are kept exactly when the outcome is. A claim
	// that is no longer current (FinishStale) or was finished already
	// (FinishDuplicate) rolls fn's writes back; so does record unset, and
	// then nothing is recorded (recorded is false) and the caller records
	// the outcome itself, as FinishTasks would.
	//
	// An error means the outcome may or may not have been recorded (a
	// commit whose answer was lost); recording the claim's outcome again
	// with FinishTasks tells which (FinishDuplicate: it was). An error
	// matching durabletype.ErrTxEnded means fn ended the transaction itself
	// (in SQL): nothing was recorded, and the attempt must not be retried.
	FinishTx(ctx context.Context, p *FinishTxParams, fn func(ctx context.Context, tx any) (o Outcome, record bool)) (res FinishResult, recorded bool, err error)
}

// FinishTxParams are the parameters of TxFinisher.FinishTx.
type FinishTxParams struct {
	Now time.Time
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
	// It also says that notifications flow (again).
	TopicResync Topic = "resync"
	// TopicDeaf: the listener lost its connection; no notification comes
	// until the next TopicResync, so engines poll meanwhile as on a store
	// that does not notify.
	TopicDeaf Topic = "deaf"
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

// TaskKeys are the keys computed for one step of a new run. An empty key
// means the step's cap or limit does not apply to this task.
type TaskKeys struct {
	// Concurrency is the concurrency key (see StepSpec.Concurrency).
	Concurrency string
	// Rate is the rate-limit key (see StepSpec.Rate).
	Rate string
}

// NewRun is one run to create.
type NewRun struct {
	ID       uuid.UUID
	Workflow string
	Tenant   string
	Input    []byte
	Shape    *durabletype.Shape
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
	Parent *durabletype.ParentRef
	// TraceParent, when set, is the W3C traceparent of the span that
	// triggered the run (for a child run, of its parent's step attempt):
	// the engines executing the run's steps parent their spans on it.
	// Stored as given; empty (most runs) stores nothing.
	TraceParent string
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
	Kind    durabletype.TaskKind
	Attempt int
	// Token identifies this claim; outcomes and heartbeats must present it.
	Token int64
	Retry durabletype.RetryPolicy
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
	// Records are the records of a KindFunc task's body (its items), in
	// the order of their calls: their RunID, Name, Kind, State, Attempt,
	// Output, Error, Child, Item and Input.
	Records []Task
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
	// OutcomeCheckpoint: a KindFunc task records the calls its body made
	// (Records); the task keeps running under its claim, and the outcome
	// of that claim is still to come.
	OutcomeCheckpoint
	// OutcomeSuspend: a KindFunc task records Records and waits for what
	// Suspend names, holding no claim; it is queued again, and its body
	// runs again from the start, once that is done.
	OutcomeSuspend
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
	// Delay (OutcomeRelease) is how long the task waits, given back,
	// before it is queued again (0: at once).
	Delay time.Duration
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
	// Records are the calls of a function's body to record
	// (OutcomeCheckpoint, OutcomeSuspend; see dag.Run.Record).
	Records []Record
	// Await names the records a suspended body waits for
	// (OutcomeSuspend): all of them, or the first to finish when
	// AwaitAny is set.
	Await    []int
	AwaitAny bool
}

// Record is one call of a durable function's body, as its worker reports
// it: a step it ran (KindStep), a sleep (KindSleep), a wait for an event
// or a signal (KindEvent), a child run (KindChild). The core records it
// as an item of the body task (dag.RecordName), and the body, run again,
// finds it there.
type Record struct {
	// Seq is the call's place among the body's calls, from 0.
	Seq int
	// Name is the call's name.
	Name string
	Kind durabletype.TaskKind
	// State is what became of a step: COMPLETED with Output, FAILED for
	// good with Error, or PENDING: its attempt Attempt failed with Error,
	// and it runs again After from now (the body waits until then).
	State   durabletype.TaskState
	Attempt int
	// Started is when attempt Attempt of a step began, by the worker's
	// clock: the record's start time for display (zero: when the record
	// is written; a time after that is ignored).
	Started time.Time
	Output  []byte
	Error   string
	// Patch marks a KindStep record that records a patch marker, not a
	// step (durable.Patched).
	Patch bool
	// After is how long a sleep lasts, or how long a failed step waits
	// before it runs again, from the moment the record is written.
	After time.Duration
	// Key is the event key, or the signal's name (Signal), a KindEvent
	// record waits for; Timeout bounds the wait (0: none); Lookback is
	// WaitSpec.Lookback.
	Key      string
	Signal   bool
	Timeout  time.Duration
	Lookback time.Duration
	// Payload, when set, describes the type a KindEvent record awaits: a
	// payload that does not fit it is refused, and the wait goes on (as
	// WaitSpec.Payload says for a step).
	Payload *durabletype.JSONType
	// Child is the run a KindChild record starts (its workflow, input and
	// shape; the store fills in the rest), and Result its step whose
	// output the record receives.
	Child  *NewRun
	Result string
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
	Settled durabletype.RunStatus
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
	Status durabletype.RunStatus
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
	// Left counts the due timers the call left alone: of runs whose shape
	// this engine cannot read (dag.Change.Leave). They stay due, for an
	// engine that can read them, and Next counts them.
	Left int
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
	Status  durabletype.RunStatus
	Input   []byte
	// FailedStep and Error describe the failure that failed the run; Error
	// is the reason of a cancelled run.
	FailedStep string
	Error      string
	// Shape is the run's DAG; set by GetRun.
	Shape *durabletype.Shape
	// IdempotencyKey is the key the run was created with, if any.
	IdempotencyKey string
	// Priority is the run's priority (PriorityMin to PriorityMax).
	Priority int
	// Deadline, when set, is when the run fails if it has not settled. It
	// is cleared when the run settles (a replayed run has none).
	Deadline time.Time
	// Parent links a child run to its parent; nil for other runs.
	Parent *durabletype.ParentRef
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
	Kind    durabletype.TaskKind
	State   durabletype.TaskState
	Attempt int
	// Lost counts the task's latest attempts in a row that lost their
	// worker (dag.Run.Rescue); an attempt that ends any other way resets
	// it. Lost attempts are not counted in Attempt.
	Lost int
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

// RunFilter selects runs. Zero fields do not filter.
type RunFilter struct {
	// Tenant keeps the runs of one tenant.
	Tenant string
	// Workflow keeps the runs of one workflow.
	Workflow string
	// Version keeps the runs pinned to one version (Run.Version).
	Version string
	// Statuses keeps the runs whose status is one of these.
	Statuses []durabletype.RunStatus
	// CreatedAfter and CreatedBefore bound the creation time: after (or
	// at) the first, before the second.
	CreatedAfter, CreatedBefore time.Time
	// FinishedAfter and FinishedBefore bound the time the run settled;
	// either keeps only settled runs.
	FinishedAfter, FinishedBefore time.Time
	// Parent keeps the child runs of one run.
	Parent uuid.UUID

	// TopLevel keeps the runs that no parent run started (not child
	// runs). With Parent set, nothing matches.
	TopLevel bool
	// IdempotencyKey keeps the runs created with this idempotency key
	// (Run.IdempotencyKey), compared exactly.
	IdempotencyKey string
	// InputContains, when not empty, is a JSON value: it keeps the runs whose
	// input is JSON that contains it, by the rule of PostgreSQL's jsonb @>
	// operator (dag.ContainsJSON). A run whose input is not JSON (another
	// Codec) or has none never matches. The caller has checked it is
	// valid JSON (dag.CheckJSONFilter).
	InputContains []byte
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

// ListRunsResult is the result of Store.ListRuns.
type ListRunsResult struct {
	Runs []durabletype.RunSummary
	// More is set when runs match after the last one returned.
	More bool
}

// ActOnRunsParams are the parameters of Store.ActOnRuns: the action, the
// runs, and the inputs of the action (those of other actions are
// ignored).
type ActOnRunsParams struct {
	Now time.Time
	// Action is what to do to each run.
	Action durabletype.RunAction
	IDs    []uuid.UUID
	// Tenant, when set, restricts the call to that tenant's runs: another
	// tenant's run is reported ErrRunNotFound.
	Tenant string
	// Version, when set, restricts the call to the runs pinned to that
	// version: a run at another version is reported ErrVersionMismatch and
	// left alone. An upgrade moves runs from Version (it must be set).
	Version string
	// Reason (cancel) is recorded as the run's error and in its events.
	Reason string
	// FromStep (replay), when set, runs that step and all its descendants
	// again even if they completed.
	FromStep string
	// To (upgrade) is the shape of the version to move to, with its
	// Version set.
	To *durabletype.Shape
}

// RunActionResult is what an action (Store.ActOnRuns) did to one run, in
// the order of the IDs: Err is nil when it was applied, else
// ErrRunNotFound, ErrVersionMismatch, ErrRunSettled, ErrRunNotSettled, or
// the refusal of the action's transition (ErrNothingToReplay,
// ErrStepNotFound; an error matching ErrIncompatible for an upgrade).
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

// PruneRunsParams are the parameters of Store.PruneRuns.
type PruneRunsParams struct {
	Now time.Time
	// OlderThan: runs that settled more than this long before Now are
	// deleted. The cutoff is taken on the store's clock.
	OlderThan time.Duration
	// Limit is the most runs deleted in one call.
	Limit int
	// Lazy lets the store keep settled runs past the cutoff, for at most a
	// quarter of OlderThan (and a day), so that it deletes whole periods of
	// runs at once instead of run by run (pgstore drops the partitions of
	// a period: docs/operating.md, "Retention"). The leader's retention
	// sets it; an operator's prune (Engine.Prune) does not. A store may
	// ignore it.
	Lazy bool
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
	// Refused lists the waiting tasks that refused an event (its payload
	// does not fit the type they await; see dag.CheckPayload), with
	// Refusal.Event the event's position in Events: they keep waiting.
	// Inside a caller's transaction nothing is delivered, and nothing is
	// refused yet (the refusals, once it commits, are in the runs' events).
	Refused []durabletype.Refusal
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
	// Refused lists the tasks of the run waiting for the signal that
	// refused it (its payload does not fit the type they await): they keep
	// waiting. The signal is kept all the same.
	Refused []durabletype.Refusal
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

// Versioner is implemented by stores that list the versions of workflows
// they recorded. Both stores of the module implement it. (Moving runs to
// another version is an action: Store.ActOnRuns with ActionUpgrade.)
type Versioner interface {
	// ListVersions returns the versions of workflows recorded with runs
	// (a shape is kept while a run uses it, and an hour after), each with
	// its shape, ordered by workflow, then newest first.
	ListVersions(ctx context.Context, p *ListVersionsParams) (*ListVersionsResult, error)
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
	Shape *durabletype.Shape
	// RecordedAt is when a run first recorded that shape.
	RecordedAt time.Time
}
