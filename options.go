package durable

import (
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// TriggerOption configures one run when it is triggered: pass options to
// Run, RunNoWait, RunNoWaitTx, Start and StartTx, or in Trigger.Options.
// An invalid option fails the trigger with an error matching
// ErrInvalidTrigger, and nothing is started.
type TriggerOption interface {
	applyTrigger(o *triggerOpts) error
}

type triggerFunc func(o *triggerOpts) error

func (f triggerFunc) applyTrigger(o *triggerOpts) error { return f(o) }

// triggerOpts are the options of one trigger.
type triggerOpts struct {
	runID      uuid.UUID
	key        string
	startAt    time.Time
	startAfter time.Duration
	deadline   time.Time
	timeout    time.Duration
	priority   Priority
	// unknownFields lets an input given by name hold fields its type does
	// not have (WithUnknownFields).
	unknownFields bool
}

// Priority orders a tenant's ready steps: those of runs with a higher
// priority are claimed first. It does not change the share of the workers
// each tenant gets (fairness between tenants holds whatever the
// priorities).
type Priority int

// Priorities, lowest first. PriorityNormal is the default.
const (
	PriorityNormal Priority = store.PriorityMin
	PriorityHigh   Priority = 1
	PriorityHigher Priority = 2
	PriorityUrgent Priority = store.PriorityMax
)

// WithIdempotencyKey makes the trigger idempotent: while a run of the same
// workflow and tenant triggered with key is kept (until retention deletes
// it), triggering again with key starts nothing and returns that run's ID
// (Started.Duplicate is set). It holds under concurrency, across engines
// and inside callers' transactions: of many triggers racing with one key,
// exactly one starts a run. key is 1-255 bytes of UTF-8 without control
// characters.
func WithIdempotencyKey(key string) TriggerOption {
	return triggerFunc(func(o *triggerOpts) error {
		if err := dag.IdempotencyKeyRule.Check("idempotency key", key); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidTrigger, err)
		}
		o.key = key
		return nil
	})
}

// WithRunID starts the run with the ID id (by default a new UUIDv7).
// Triggering again with the same ID, for the same workflow and tenant,
// starts nothing and returns it as a duplicate; an ID taken by a run of
// another workflow or tenant fails with an error matching ErrRunExists.
func WithRunID(id uuid.UUID) TriggerOption {
	return triggerFunc(func(o *triggerOpts) error {
		if id == uuid.Nil {
			return fmt.Errorf("%w: the nil run ID", ErrInvalidTrigger)
		}
		o.runID = id
		return nil
	})
}

// WithStartAt delays the run's start to t: its first steps wait until then
// as durable timers (no goroutine, surviving restarts), and run when the
// leader fires them. A time in the past starts the run at once.
func WithStartAt(t time.Time) TriggerOption {
	return triggerFunc(func(o *triggerOpts) error {
		if !dag.ValidTime(t) {
			return fmt.Errorf("%w: start time %s outside years 1-9999", ErrInvalidTrigger, t)
		}
		o.startAt = t
		return nil
	})
}

// WithStartAfter delays the run's start by d, counted on the store's clock
// from the trigger (see WithStartAt).
func WithStartAfter(d time.Duration) TriggerOption {
	return triggerFunc(func(o *triggerOpts) error {
		if d < 0 {
			return fmt.Errorf("%w: negative start delay %s", ErrInvalidTrigger, d)
		}
		o.startAfter = d
		return nil
	})
}

// WithDeadline fails the run if it has not settled by t: it becomes FAILED
// with the error "run deadline exceeded", its unfinished steps are
// cancelled (running ones through their contexts, and their late outcomes
// are not recorded), and its on-failure handler runs. A deadline is a
// failure rather than a cancellation because the work did not get done in
// time, which is what on-failure handlers (alerts, compensation) are for;
// a cancellation is an operator's decision and runs no handler.
func WithDeadline(t time.Time) TriggerOption {
	return triggerFunc(func(o *triggerOpts) error {
		if !dag.ValidTime(t) {
			return fmt.Errorf("%w: deadline %s outside years 1-9999", ErrInvalidTrigger, t)
		}
		o.deadline = t
		return nil
	})
}

// WithRunTimeout sets the run's deadline (see WithDeadline) d after the
// trigger, on the store's clock.
func WithRunTimeout(d time.Duration) TriggerOption {
	return triggerFunc(func(o *triggerOpts) error {
		if d <= 0 {
			return fmt.Errorf("%w: run timeout %s must be positive", ErrInvalidTrigger, d)
		}
		o.timeout = d
		return nil
	})
}

// WithPriority sets the run's priority (PriorityNormal by default).
func WithPriority(p Priority) TriggerOption {
	return triggerFunc(func(o *triggerOpts) error {
		if p < PriorityNormal || p > PriorityUrgent {
			return fmt.Errorf("%w: priority %d outside [%d, %d]", ErrInvalidTrigger, p, PriorityNormal, PriorityUrgent)
		}
		o.priority = p
		return nil
	})
}

// WithUnknownFields lets the input of a trigger by name (StartByName,
// StartManyByName), decoded with the JSON codec, hold fields its type does
// not have: they are ignored, kept in the run's recorded input, rather
// than refused with ErrInvalidInput (a misspelt field). It changes nothing
// for a typed trigger, whose Go value has no unknown field.
func WithUnknownFields() TriggerOption {
	return triggerFunc(func(o *triggerOpts) error {
		o.unknownFields = true
		return nil
	})
}

// newRun applies opts to a new run of the trigger at index k, created at
// now (zero: the store's clock).
func applyTrigger(opts []TriggerOption) (*triggerOpts, error) {
	o := &triggerOpts{}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt.applyTrigger(o); err != nil {
			return nil, err
		}
	}
	return o, nil
}
