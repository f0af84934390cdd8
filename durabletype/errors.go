package durabletype

import "errors"

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
	// ErrPoisonStep is matched by the error of a run whose step failed
	// because its attempts lost their worker LostLimit times in a row (see
	// StepSpec.LostLimit): a step that kills, freezes or disconnects the
	// process running it (out of memory, os.Exit, a crash in cgo) fails
	// instead of taking worker after worker down.
	ErrPoisonStep = errors.New("durable: step lost its worker too many times in a row")
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

func (e *transientError) Error() string { return e.err.Error() }

func (e *transientError) Unwrap() error { return e.err }

func (e *transientError) Is(target error) bool { return target == ErrTransient }

var (
	// ErrScheduleExists: a schedule with this tenant and name exists.
	ErrScheduleExists = errors.New("durable: schedule already exists")
	// ErrScheduleNotFound: no schedule has this tenant and name.
	ErrScheduleNotFound = errors.New("durable: schedule not found")
	// ErrInvalidSchedule: the cron expression, the time zone or another
	// field of a schedule is not valid.
	ErrInvalidSchedule = errors.New("durable: invalid schedule")
)

// ErrTxEnded: a transactional step (durable.TxStep) ended the store's
// transaction itself, with COMMIT, ROLLBACK or PREPARE TRANSACTION in SQL
// (with AND CHAIN too): its writes no longer commit with its outcome. The
// step fails without retries, since a retry could write them twice. (A
// RESET ALL in the step also clears the store's mark of its transaction,
// and counts as ending it.)
var ErrTxEnded = errors.New("durable: the step ended its transaction itself (COMMIT or ROLLBACK in SQL): its writes and its outcome no longer commit together")

// ErrInvalidWorker is returned when registering a worker record that is
// not valid: an invalid ID, a negative count, a DeadAfter that is not
// positive.
var ErrInvalidWorker = errors.New("durable/store: invalid worker record")

// ErrNotLeader is returned by a leader-only write (firing timers and
// schedules, rescuing dead workers' steps, applying pending messages,
// pruning runs, events and workers' records) made under a leader's term
// (store.WithTerm) that is no longer the current one: the lease expired or
// another engine took over. Nothing was written; the caller stops its
// leader's duties.
var ErrNotLeader = errors.New("durable/store: not the leader: the term is not the current lease's")

// ErrUnknownShape is matched by a *ShapeError: a run's recorded shape is
// one this engine cannot read, written by a newer release (a step kind or
// a field it does not know). The engine leaves such runs alone, for an
// engine that can read them.
var ErrUnknownShape = errors.New("durable: run needs a newer engine")

// A ShapeError reports a recorded shape that this engine cannot decode or
// compile. It matches ErrUnknownShape.
type ShapeError struct {
	// Shape identifies the recorded shape (the store's shape id), when known.
	Shape string
	// Workflow is the workflow of the run (or shape) that needs it.
	Workflow string
	// Tenant is the tenant of the run that needs it, when the error is of
	// a run: a read scoped to another tenant reports ErrRunNotFound
	// instead. Not part of the message.
	Tenant string
	// Reason is why the shape could not be read.
	Reason error
}

func (e *ShapeError) Error() string {
	msg := "workflow " + e.Workflow + " needs a newer engine: cannot read its shape " + e.Shape
	if e.Reason != nil {
		msg += ": " + e.Reason.Error()
	}
	return msg
}

// Unwrap returns the reason.
func (e *ShapeError) Unwrap() error { return e.Reason }

// Is reports whether target is ErrUnknownShape.
func (e *ShapeError) Is(target error) bool { return target == ErrUnknownShape }
