package durable

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Context is the context a step (or on-failure handler) runs with. It is a
// context.Context, cancelled when the engine stops hard, when the step's
// claim is lost (another worker took the step over after this one missed its
// heartbeats), when its run was cancelled, or when its run is over;
// context.Cause then tells which (ErrEngineStopped, ErrClaimLost,
// ErrRunCancelled). Pass it on to database calls and HTTP requests so they
// stop too.
type Context interface {
	context.Context
	// RunID is the ID of the run.
	RunID() uuid.UUID
	// Workflow is the workflow's name.
	Workflow() string
	// TenantID is the tenant the run was started for.
	TenantID() string
	// StepName is the name of the running step.
	StepName() string
	// Attempt is the attempt number, starting at 1.
	Attempt() int
	// WorkerID is the ID of the engine running the step.
	WorkerID() string
	// Heartbeat tells the store that this worker is alive and checks that
	// the step's claim is still current. The engine heartbeats running steps
	// on its own every Config.HeartbeatInterval; a long step may call
	// Heartbeat to learn early that its claim was lost (it returns
	// ErrClaimLost) or its run cancelled (ErrRunCancelled), in which case
	// the context is cancelled too. Once the context is done, Heartbeat
	// returns its cause (ErrClaimLost, ErrRunCancelled, ErrStepTimeout,
	// ErrEngineStopped) without asking the store.
	Heartbeat() error
}

type stepContextKey struct{}

type stepContext struct {
	context.Context
	e     *Engine
	claim *store.ClaimedTask
	step  *stepDef // nil for the on-failure handler
	// parents holds the decoded outputs of the parents that completed.
	parents map[*stepDef]any
	cancel  context.CancelCauseFunc
	// lose cancels the step because its claim is no longer current, so
	// that the engine knows why when the store rejects its outcome.
	lose func(error)
	// item: the task is an item of a map step, which reads no parent.
	item   bool
	misuse atomic.Pointer[error]
	// begin says that the attempt begins for good: its skip conditions did
	// not fire (the metrics count it started then); never nil.
	begin func()
	// recorded is set to the result of the step's outcome when the store
	// recorded it with the step's own writes (a TxStep).
	recorded **store.FinishResult
	// checkpoint records an outcome of the claim that does not end it
	// (a function's calls), and returns its result.
	checkpoint func(ctx context.Context, o store.Outcome) (store.FinishResult, error)
}

// isParent reports whether p is a declared parent of the running step.
func (c *stepContext) isParent(p *stepDef) bool {
	return c.step != nil && slices.Contains(c.step.parents, p)
}

// misusedBy records the first misuse of the API by the running step and
// cancels its context with it as the cause; the step then fails with it,
// whatever it returns.
func (c *stepContext) misusedBy(err error) {
	if c.misuse.CompareAndSwap(nil, &err) {
		c.cancel(err)
	}
}

// misused returns the step's first misuse of the API, or nil.
func (c *stepContext) misused() error {
	if p := c.misuse.Load(); p != nil {
		return *p
	}
	return nil
}

var _ Context = (*stepContext)(nil)

func (c *stepContext) Value(key any) any {
	if _, ok := key.(stepContextKey); ok {
		return c
	}
	return c.Context.Value(key)
}

func (c *stepContext) RunID() uuid.UUID { return c.claim.RunID }
func (c *stepContext) Workflow() string { return c.claim.Workflow }
func (c *stepContext) TenantID() string { return c.claim.Tenant }
func (c *stepContext) StepName() string { return dag.DisplayName(c.claim.Step) }
func (c *stepContext) Attempt() int     { return c.claim.Attempt }
func (c *stepContext) WorkerID() string { return c.e.cfg.WorkerID }

func (c *stepContext) Heartbeat() error {
	if c.Err() != nil {
		// The engine already stopped the step (its own heartbeat learned
		// the claim was lost, the run was cancelled, the attempt timed
		// out): say why rather than that the store call was cancelled.
		return context.Cause(c)
	}
	res, err := c.e.store.Heartbeat(c, &store.HeartbeatParams{
		Now: c.e.now(), WorkerID: c.e.cfg.WorkerID, Tasks: []store.TaskRef{c.claim.Ref()},
	})
	if err != nil {
		if c.Err() != nil { // stopped meanwhile, as above
			return context.Cause(c)
		}
		return fmt.Errorf("durable: heartbeat: %w", err)
	}
	if len(res.Cancelled) > 0 {
		c.lose(ErrRunCancelled)
		return ErrRunCancelled
	}
	if len(res.TimedOut) > 0 {
		c.lose(ErrStepTimeout)
		return ErrStepTimeout
	}
	if len(res.Lost) > 0 {
		c.lose(ErrClaimLost)
		return ErrClaimLost
	}
	return nil
}
