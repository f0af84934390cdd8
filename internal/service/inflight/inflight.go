// Package inflight keeps the steps an engine runs, keyed by their claims:
// the executor adds a step as it starts it, the heartbeat lists the claims
// to vouch for and stops the steps whose claims the store says are lost,
// the completer forgets a step once its outcome is recorded (or given up),
// and the worker's record counts them.
//
// A task rescued from an engine and claimed by it again runs twice at once,
// under two claims: each is kept, stopped and forgotten on its own.
package inflight

import (
	"context"
	"errors"
	"sync"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/store"
)

// Causes are the errors a step's context is cancelled with when its claim
// stops being current: its run was cancelled, its attempt timed out, or
// the claim was lost otherwise (rescued, or taken by another worker).
type Causes struct {
	RunCancelled error
	TimedOut     error
	ClaimLost    error
}

// Steps is the set of steps an engine runs. Its methods are safe for
// concurrent use.
type Steps struct {
	causes Causes
	mu     sync.Mutex
	steps  map[store.TaskRef]*Step
}

// Step is one running step.
type Step struct {
	cancel context.CancelCauseFunc
	// lost is why the engine stopped the step, nil while its claim is
	// current; under Steps.mu.
	lost error
}

// New returns an empty set whose steps are stopped with causes.
func New(causes Causes) *Steps {
	return &Steps{causes: causes, steps: map[store.TaskRef]*Step{}}
}

// Add adds the step running under claim ref, whose context cancel
// cancels, and returns it.
func (s *Steps) Add(ref store.TaskRef, cancel context.CancelCauseFunc) *Step {
	f := &Step{cancel: cancel}
	s.mu.Lock()
	s.steps[ref] = f
	s.mu.Unlock()
	return f
}

// Lose cancels step f because its claim is no longer current, with cause;
// the first cause stays (a step told its run was cancelled is not told
// later that its claim was lost).
func (s *Steps) Lose(f *Step, cause error) {
	s.mu.Lock()
	f.lose(cause)
	s.mu.Unlock()
}

// lose is Lose with s.mu held.
func (f *Step) lose(cause error) {
	if f.lost == nil {
		f.lost = cause
	}
	f.cancel(cause)
}

// Refs returns the claims of the running steps, in no order.
func (s *Steps) Refs() []store.TaskRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	refs := make([]store.TaskRef, 0, len(s.steps))
	for ref := range s.steps {
		refs = append(refs, ref)
	}
	return refs
}

// Len counts the running steps.
func (s *Steps) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steps)
}

// Heartbeat stops the steps whose claims a heartbeat found no longer
// current: with the cause RunCancelled when their run was cancelled,
// TimedOut when their attempt timed out, ClaimLost otherwise.
func (s *Steps) Heartbeat(res *store.HeartbeatResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, refs := range [...]struct {
		refs  []store.TaskRef
		cause error
	}{{res.Cancelled, s.causes.RunCancelled}, {res.TimedOut, s.causes.TimedOut}, {res.Lost, s.causes.ClaimLost}} {
		for _, ref := range refs.refs {
			if f := s.steps[ref]; f != nil {
				f.lose(refs.cause)
			}
		}
	}
}

// RunCancelled stops the steps of run id, which was cancelled (cause
// RunCancelled), as soon as the store says so: their heartbeats would say
// it later.
func (s *Steps) RunCancelled(id uuid.UUID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ref, f := range s.steps {
		if ref.RunID == id {
			f.lose(s.causes.RunCancelled)
		}
	}
}

// WasCancelled reports whether the engine stopped the step under claim ref
// because its run was cancelled.
func (s *Steps) WasCancelled(ref store.TaskRef) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.steps[ref]
	return f != nil && f.lost != nil && errors.Is(f.lost, s.causes.RunCancelled)
}

// WasTimedOut reports whether the engine stopped the step under claim ref
// because its attempt timed out (its own timer, or the store's answer to a
// heartbeat).
func (s *Steps) WasTimedOut(ref store.TaskRef) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.steps[ref]
	return f != nil && f.lost != nil && errors.Is(f.lost, s.causes.TimedOut)
}

// Forget forgets the steps of outcomes that were recorded or given up.
func (s *Steps) Forget(outcomes []store.Outcome) {
	s.mu.Lock()
	for i := range outcomes {
		delete(s.steps, outcomes[i].Task)
	}
	s.mu.Unlock()
}
