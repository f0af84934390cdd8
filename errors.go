package durable

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// Definition errors, reported by Engine.Register (and by triggering an
// invalid workflow) inside a *DefinitionError. Match them with errors.Is.
var (
	ErrEmptyWorkflow      = dag.ErrEmptyWorkflow
	ErrInvalidName        = dag.ErrInvalidName
	ErrDuplicateStep      = dag.ErrDuplicateStep
	ErrInvalidSleep       = dag.ErrInvalidSleep
	ErrInvalidRetryPolicy = dag.ErrInvalidRetry
	ErrDuplicateParent    = dag.ErrDuplicateParent
	ErrDuplicateWorkflow  = errors.New("duplicate workflow name")
	ErrForeignParent      = errors.New("parent belongs to another workflow")
	ErrSkipNotParent      = errors.New("skip condition is on a step that is not a parent")
	ErrNilFunc            = errors.New("function is nil")
	ErrInvalidOption      = errors.New("option does not apply here")
	ErrWorkflowFrozen     = errors.New("workflow changed after it was registered or run")
	// ErrInvalidLimit: a concurrency cap below 1, or a rate limit below 1
	// per millisecond.
	ErrInvalidLimit = errors.New("invalid concurrency cap or rate limit")
)

// Errors of triggering and running.
var (
	// ErrInvalidTenant: a tenant ID must be 1 to 200 bytes of UTF-8 without
	// control characters.
	ErrInvalidTenant = durabletype.ErrInvalidTenant
	// ErrInvalidKey: a concurrency or rate-limit key function panicked or
	// returned a key that is not 1 to 200 bytes of UTF-8 without control
	// characters; the run was not started.
	ErrInvalidKey = durabletype.ErrInvalidKey

	// ErrInvalidEvent is returned when sending an event whose tenant or key
	// is invalid, or a signal whose name is (1-255 bytes of UTF-8 without
	// control characters).
	ErrInvalidEvent = durabletype.ErrInvalidEvent
	// ErrEncode: the codec could not encode a value, or the encoded value
	// does not decode back into its type.
	ErrEncode = errors.New("durable: cannot encode value")
	// ErrDecode: a stored input or output does not decode into its type.
	ErrDecode = errors.New("durable: cannot decode value")
	// ErrRunFailed is matched by the *RunError that Run returns (and Wait's
	// result holds) for a run that failed.
	ErrRunFailed = errors.New("durable: run failed")
	// ErrRunNotFound: no run has this ID.
	ErrRunNotFound = durabletype.ErrRunNotFound
	// ErrNoOutput: the step has no output (it did not complete).
	ErrNoOutput = errors.New("durable: step has no output")
	// ErrClaimLost: this worker no longer owns the step's claim (it was
	// rescued after missed heartbeats), or the run is over. It is the cause
	// of a step context cancelled for that reason.
	ErrClaimLost = errors.New("durable: claim lost")
	// ErrEngineStopped is the cause of step contexts cancelled by Stop, and
	// the error of operations on a stopped engine.
	ErrEngineStopped = errors.New("durable: engine stopped")
	// ErrAlreadyStarted: Start was called twice.
	ErrAlreadyStarted = errors.New("durable: engine already started")
	// ErrTxUnsupported: the store cannot work in transactions: start runs
	// or send events inside a caller's transaction, or record a TxStep's
	// outcome in the step's own.
	ErrTxUnsupported = errors.New("durable: store does not support transactions")
	// ErrTxEnded: a TxStep ended its transaction itself (COMMIT or
	// ROLLBACK in SQL, rather than returning); it fails without retries.
	ErrTxEnded = durabletype.ErrTxEnded
	// ErrPayloadRefused: a step waiting for an event or a signal refused
	// its payload, which cannot be read as the type it awaits; it keeps
	// waiting. SendEvent and Signal return a *RefusedError that lists the
	// refusals and matches it.
	ErrPayloadRefused = durabletype.ErrPayloadRefused
	// ErrPayloadTooLarge: an input, an output, an event's or a signal's
	// payload is larger than its limit (Config.MaxInputSize,
	// MaxOutputSize, MaxEventSize).
	ErrPayloadTooLarge = durabletype.ErrPayloadTooLarge
	// ErrNotParent: a step read the output of a step that is not one of
	// its declared parents (StepRef.Output). The step fails without
	// retries; the fix is to add the step to its After.
	ErrNotParent = errors.New("durable: output read by a step that is not a child")
	// ErrNotRecorded is matched by Stop's error when the store refused or
	// could not take some step outcomes; those steps are rescued and run
	// again.
	ErrNotRecorded = errors.New("durable: outcomes not recorded")
	// ErrInvalidTrigger: a trigger option is invalid (an idempotency key
	// that is empty, too long or holds control characters, a priority out
	// of range, a negative delay, a time outside years 1-9999). Nothing is
	// started.
	ErrInvalidTrigger = errors.New("durable: invalid trigger option")
	// ErrStepTimeout is the cause of a step context cancelled because the
	// attempt ran past its WithTimeout.
	ErrStepTimeout = errors.New("durable: step timed out")
	// ErrPoisonStep is matched by the *RunError of a run whose step failed
	// because its attempts lost their worker too many times in a row (see
	// WithLostLimit).
	ErrPoisonStep = durabletype.ErrPoisonStep
	// ErrUnknownStep: a claimed task names a step (or handler) that the
	// workflow registered in this process does not have, usually because a
	// deploy changed the workflow while the run was in flight.
	ErrUnknownStep = errors.New("durable: step not in the registered workflow")
	// ErrUnknownShape is matched by the error of reading a run whose
	// recorded shape this engine cannot read (a *durabletype.ShapeError):
	// a newer release started it with a feature this one does not know.
	// The engine leaves such runs to an engine that can read them.
	ErrUnknownShape = durabletype.ErrUnknownShape
)

// DefinitionError is an error in a workflow definition.
type DefinitionError struct {
	// Workflow is the name of the workflow at fault.
	Workflow string
	// Step is the step at fault; empty when the error is about the whole
	// workflow.
	Step string
	// Err is one of the definition errors above (ErrDuplicateStep, ...).
	Err error
	// Detail says more, e.g. which parent or which policy field.
	Detail string
}

// Error describes the problem, naming the workflow and the step.
func (e *DefinitionError) Error() string {
	msg := "durable: workflow " + dag.Quote(e.Workflow)
	if e.Step != "" {
		msg += ": step " + dag.Quote(e.Step)
	}
	msg += ": " + e.Err.Error()
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns Err, so that errors.Is matches the sentinel.
func (e *DefinitionError) Unwrap() error { return e.Err }

// TerminalError marks a step error that must not be retried: the step fails
// at once and fails its run. Create one with Terminal.
type TerminalError struct {
	// Err is the step's error.
	Err error
}

// Error returns Err's message.
func (e *TerminalError) Error() string {
	if e.Err == nil {
		return "terminal error"
	}
	return e.Err.Error()
}

// Unwrap returns Err.
func (e *TerminalError) Unwrap() error { return e.Err }

// Terminal wraps err so that the step returning it is not retried.
func Terminal(err error) error { return &TerminalError{Err: err} }

// IsTerminal reports whether err is, or wraps, a *TerminalError.
func IsTerminal(err error) bool {
	var te *TerminalError
	return errors.As(err, &te)
}

// WaitError is the error of Run and Wait when their context ends before the
// run settles: the run goes on, and RunID says which run to wait for (or
// Get) later. It unwraps to the context's error, so errors.Is(err,
// context.DeadlineExceeded) holds.
type WaitError struct {
	// RunID is the run that was being waited for.
	RunID uuid.UUID
	// Err is the context's error.
	Err error
}

// Error names the run and why the wait ended.
func (e *WaitError) Error() string {
	return fmt.Sprintf("durable: stopped waiting for run %s: %v", e.RunID, e.Err)
}

// Unwrap returns Err.
func (e *WaitError) Unwrap() error { return e.Err }

// RunError is the error of a run that failed or was cancelled: the step
// that failed it and that step's error message, or the reason it was
// cancelled. It matches ErrRunFailed or ErrRunCancelled.
type RunError struct {
	// RunID is the run.
	RunID uuid.UUID
	// Workflow is the run's workflow.
	Workflow string
	// Status is FAILED or CANCELLED.
	Status durabletype.RunStatus
	// Step is the step whose permanent failure failed the run; empty for a
	// cancelled run and for a run that failed as a whole (its deadline
	// passed: Message is "run deadline exceeded").
	Step string
	// Message is that step's error message, as recorded, or the reason the
	// run was cancelled.
	Message string
}

// Error names the run, its workflow, and the step that failed (if one
// did) and its message, or the reason it was cancelled.
func (e *RunError) Error() string {
	if e.Status == durabletype.RunCancelled {
		msg := fmt.Sprintf("durable: run %s of %q was cancelled", e.RunID, e.Workflow)
		if e.Message != "" {
			msg += ": " + e.Message
		}
		return msg
	}
	if e.Step == "" {
		return fmt.Sprintf("durable: run %s of %q failed: %s", e.RunID, e.Workflow, e.Message)
	}
	return fmt.Sprintf("durable: run %s of %q failed: step %q: %s", e.RunID, e.Workflow, e.Step, e.Message)
}

// Is makes errors.Is(err, ErrRunFailed) true for a failed run and
// errors.Is(err, ErrRunCancelled) for a cancelled one, and
// errors.Is(err, ErrPoisonStep) for a run whose step failed for losing
// its worker too many times in a row.
func (e *RunError) Is(target error) bool {
	if e.Status == durabletype.RunCancelled {
		return target == ErrRunCancelled
	}
	return target == ErrRunFailed || target == ErrPoisonStep && strings.HasPrefix(e.Message, dag.PoisonText)
}

// RefusedError is the error of SendEvent, SendEvents and Signal when some
// waiting steps refused the payload: it lists them. It matches
// ErrPayloadRefused.
type RefusedError = durabletype.RefusedError

// Refusal is one waiting step that refused a payload (RefusedError).
type Refusal = durabletype.Refusal
