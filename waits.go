package durable

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Steps that wait: for an event, a signal, a child run, or the items of a
// map step. A waiting step holds no worker, goroutine or timer: it is a row
// in the store, and what ends its wait (the event, the child's settlement,
// the last item) is a transition like any other. See docs/semantics.md,
// "Events, signals, child runs and maps", for the exact rules.

// WaitForEvent declares a step that waits for an event. When its parents
// are resolved, a worker runs key, which computes the event's key from the
// run's input (and from parents' outputs, read with ref.Output(ctx) like
// any step); then the step waits, holding no worker, until an event with
// that key is sent for the run's tenant (Engine.SendEvent). The event's
// payload, decoded into P, is the step's output.
//
// Delivery: every step waiting for the key when the event is sent receives
// it, exactly once; a step that begins waiting later receives an event sent
// before only if WithLookback covers it. WithWaitTimeout bounds the wait:
// the step then fails (without retry), or is skipped with SkipOnTimeout, so
// that a workflow can branch on whether the event came in time.
//
// key must return 1-255 bytes of UTF-8 without control characters; an
// invalid key, an error or a panic fails the step (an error is retried per
// WithRetry). Options that apply: After, SkipIf, WithRetry,
// WithQueueTimeout, WithWaitTimeout, SkipOnTimeout, WithLookback.
func WaitForEvent[P, I any](w *Workflow[I], name string, key func(ctx Context, in I) (string, error), opts ...StepOption) *StepRef[P] {
	s := w.defn().add(name, opts, false)
	if key == nil {
		s.fail(ErrNilFunc, "event key function")
	} else {
		s.wait.key = func(ctx Context, in any) (string, error) { return key(ctx, in.(I)) }
	}
	s.kind = durabletype.KindEvent
	setDecode[P](s)
	return &StepRef[P]{def: s}
}

// WaitForSignal declares a step that waits for the signal named signal,
// sent to its run by ID (Engine.Signal). Signals are kept with their run:
// the step receives the first signal of that name sent to the run, whether
// it was sent before the step began waiting or while it waits (every step
// of the run waiting for that name receives the same). Its payload,
// decoded into P, is the step's output. signal is 1-255 bytes of UTF-8
// without control characters. Options that apply: After, SkipIf,
// WithQueueTimeout, WithWaitTimeout, SkipOnTimeout.
func WaitForSignal[P, I any](w *Workflow[I], name, signal string, opts ...StepOption) *StepRef[P] {
	s := w.defn().add(name, opts, false)
	s.kind = durabletype.KindEvent
	s.wait.signal = signal
	if !dag.ValidEventKey(signal) {
		s.fail(ErrInvalidOption, fmt.Sprintf("signal name %s: use 1-%d bytes of UTF-8 without control characters",
			dag.Quote(signal), dag.MaxEventKeyLen))
	}
	setDecode[P](s)
	return &StepRef[P]{def: s}
}

// Child declares a step that starts a run of workflow child, its child
// run, and waits for it, holding no worker: input computes the child's
// input; the output of the child's step result becomes this step's output
// (if that step was skipped, this step is skipped too). The child runs for
// the same tenant and with the same priority.
//
// The child starts exactly once per attempt, even if the worker dies right
// after: its ID derives from this run, this step and the attempt's claim,
// and it is created in the same transaction that records the attempt. A
// child that fails or is cancelled fails the attempt, which is retried per
// WithRetry with a new child; WithTimeout bounds each attempt, the child's
// run included (the child is then cancelled). Cancelling this run (or its
// failure, or its deadline) cancels its children.
//
// Registering the parent workflow registers child too (and its own
// children), unless a workflow of that name is registered already. result
// must be a step of child.
func Child[CI, CO, I any](w *Workflow[I], name string, child *Workflow[CI], result *StepRef[CO],
	input func(ctx Context, in I) (CI, error), opts ...StepOption) *StepRef[CO] {
	s := w.defn().add(name, opts, false)
	s.kind = durabletype.KindChild
	switch {
	case child.definition() == nil:
		s.fail(ErrNilFunc, "child workflow")
	case result == nil || result.def == nil:
		s.fail(ErrNilFunc, "child result step")
	case input == nil:
		s.fail(ErrNilFunc, "child input function")
	default:
		cd := child.definition()
		s.child = &childDef{wf: cd, result: result.def,
			input: func(ctx Context, in any) (any, error) { return input(ctx, in.(I)) },
			encode: func(e *Engine, v any) ([]byte, []store.TaskKeys, error) {
				b, err := e.cfg.Codec.Marshal(v)
				if err != nil {
					return nil, nil, fmt.Errorf("%w: child input: %w", ErrEncode, err)
				}
				if _, err := cd.decodeInput(e.cfg.Codec, b); err != nil {
					return nil, nil, fmt.Errorf("%w: child input does not decode back into its type: %w", ErrEncode, err)
				}
				keys, err := cd.keys(v.(CI))
				return b, keys, err
			}}
	}
	setDecode[CO](s)
	return &StepRef[CO]{def: s}
}

// Map declares a map step: once over (which becomes a parent) has
// completed, fn runs on each item of its list, one task per item, each
// with its own attempts and retries (WithRetry, WithTimeout and
// WithQueueTimeout apply to each item). Items are claimed fairly with every
// other task of the tenant. The step's output is the list of the items'
// outputs, in the order of the input list; its children receive it once
// every item has completed. An item that fails for good fails the step
// (its other items are cancelled) and so the run, as any step failure. A
// list of up to 100,000 items is accepted (dag.MaxItems); an empty list
// completes the step at once with an empty output. If over was skipped the
// map step is skipped. To map over a list the run's input holds, use
// MapInput.
//
// fn must be safe to run more than once for the same item. A replay keeps
// the outputs of the items that completed with the same input, unless the
// replay starts from this step or an earlier one.
func Map[T, U, I any](w *Workflow[I], name string, over *StepRef[[]T], fn func(ctx Context, item T) (U, error), opts ...StepOption) *StepRef[[]U] {
	if over != nil && over.def != nil {
		opts = append([]StepOption{After(over)}, opts...)
	}
	s := w.defn().add(name, opts, false)
	s.kind = durabletype.KindMap
	switch {
	case over == nil || over.def == nil:
		s.fail(ErrNilFunc, "map list step")
	case fn == nil:
		s.fail(ErrNilFunc, "map function")
	default:
		s.mapDef = newMapDef(fn)
		s.mapDef.over = over.def
	}
	setMapDecode[U](s)
	return &StepRef[[]U]{def: s}
}

// MapInput declares a map step over a list the run's input holds: items
// selects it from the input (func(in Invoice) []Line { return in.Lines }),
// and fn runs on each of its items, one task per item, as with Map (see
// Map for the items' retries, timeouts, order, failures, limits and
// replays). Without After the step has no parent: it starts with the run.
//
// items runs when the step starts, on the step's worker; the list it
// returns is recorded with the items' tasks, so that a retried item sees
// the same one. An attempt whose worker died before the fan-out was
// recorded, and a replay, run items again on the same input: it must
// depend on its input only. A nil or empty list completes the step at
// once with an empty output; a panic in items (a nil pointer in the
// input, say) fails the step without retry. Options that apply: After,
// SkipIf, WithRetry, WithTimeout, WithQueueTimeout, WithLostLimit.
func MapInput[T, U, I any](w *Workflow[I], name string, items func(in I) []T, fn func(ctx Context, item T) (U, error), opts ...StepOption) *StepRef[[]U] {
	s := w.defn().add(name, opts, false)
	s.kind = durabletype.KindMap
	switch {
	case items == nil:
		s.fail(ErrNilFunc, "map items function")
	case fn == nil:
		s.fail(ErrNilFunc, "map function")
	default:
		s.mapDef = newMapDef(fn)
		s.mapDef.input = func(in any) any { return items(in.(I)) }
	}
	setMapDecode[U](s)
	return &StepRef[[]U]{def: s}
}

// newMapDef returns what a map step of fn does with its items: split its
// list ([]T) into encoded items, decode one, run fn on it, check its
// output. The caller sets where the list comes from.
func newMapDef[T, U any](fn func(ctx Context, item T) (U, error)) *mapDef {
	return &mapDef{
		item: reflect.TypeFor[T](),
		split: func(c Codec, list any) ([][]byte, error) {
			items := list.([]T)
			out := make([][]byte, len(items))
			for k, it := range items {
				b, err := c.Marshal(it)
				if err != nil {
					return nil, fmt.Errorf("%w: item %d: %w", ErrEncode, k, err)
				}
				out[k] = b
			}
			return out, nil
		},
		decodeItem: func(c Codec, b []byte) (any, error) {
			var it T
			if err := c.Unmarshal(b, &it); err != nil {
				return nil, err
			}
			return it, nil
		},
		run: func(ctx Context, item any) (any, error) { return fn(ctx, item.(T)) },
		check: func(c Codec, b []byte) error {
			var out U
			return c.Unmarshal(b, &out)
		},
	}
}

// setMapDecode sets how map step s's output, a []U, decodes: from the
// list of its items' outputs.
func setMapDecode[U any](s *stepDef) {
	setDecode[[]U](s)
	s.decodeItems = func(c Codec, items [][]byte) (any, error) {
		out := make([]U, len(items))
		for k, b := range items {
			if err := c.Unmarshal(b, &out[k]); err != nil {
				return nil, fmt.Errorf("item %d: %w", k, err)
			}
		}
		return out, nil
	}
}

// setDecode sets how step s's output decodes: into an O.
func setDecode[O any](s *stepDef) {
	s.out = reflect.TypeFor[O]()
	s.decodeOutput = func(c Codec, b []byte) (any, error) {
		var out O
		if err := c.Unmarshal(b, &out); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// WithWaitTimeout bounds the wait of a WaitForEvent or WaitForSignal step
// to d, counted from the moment it begins waiting: past it the step fails,
// without retry, or is skipped (SkipOnTimeout). d must be positive.
func WithWaitTimeout(d time.Duration) StepOption {
	return optionFunc(func(s *stepDef, onFailure bool) {
		switch {
		case onFailure:
			s.fail(ErrInvalidOption, "WithWaitTimeout does not apply to an on-failure handler")
		case d <= 0:
			s.fail(ErrInvalidOption, fmt.Sprintf("WithWaitTimeout(%s): the timeout must be positive", d))
		default:
			s.wait.timeout = d
		}
	})
}

// SkipOnTimeout makes a waiting step that times out (WithWaitTimeout)
// skipped rather than failed: its children run if they have another
// completed parent, and are skipped otherwise (the usual cascade). To
// branch on the timeout, give a step the wait and a step before it as
// parents: it runs either way, and the wait's Output reports false after
// a timeout.
func SkipOnTimeout() StepOption {
	return optionFunc(func(s *stepDef, onFailure bool) {
		if onFailure {
			s.fail(ErrInvalidOption, "SkipOnTimeout does not apply to an on-failure handler")
			return
		}
		s.wait.skip = true
	})
}

// WithLookback lets a WaitForEvent step receive an event sent up to d
// before it began waiting (the first such event), as if it had been
// waiting then: the guard against the race of an event that arrives while
// the steps before the wait are still finishing. Events are kept for
// Config.EventRetention; a lookback longer than that finds only what is
// kept. By default a step receives only the events sent while it waits.
func WithLookback(d time.Duration) StepOption {
	return optionFunc(func(s *stepDef, onFailure bool) {
		switch {
		case onFailure:
			s.fail(ErrInvalidOption, "WithLookback does not apply to an on-failure handler")
		case d < 0:
			s.fail(ErrInvalidOption, fmt.Sprintf("WithLookback(%s): the lookback must not be negative", d))
		default:
			s.wait.lookback = d
		}
	})
}

// waitDef is what a WaitForEvent or WaitForSignal step waits for.
type waitDef struct {
	key      func(ctx Context, in any) (string, error) // events
	signal   string                                    // signals
	timeout  time.Duration
	skip     bool
	lookback time.Duration
}

func (w *waitDef) set() bool { return w.timeout != 0 || w.skip || w.lookback != 0 }

// childDef is what a Child step starts.
type childDef struct {
	wf     *workflowDef
	result *stepDef
	input  func(ctx Context, in any) (any, error)
	encode func(e *Engine, v any) ([]byte, []store.TaskKeys, error)
}

// mapDef is what a Map or MapInput step maps: the list of its parent
// over, or (over nil) the list input selects from the run's input.
type mapDef struct {
	over       *stepDef
	input      func(in any) any // MapInput: the []T of the run's input
	item       reflect.Type     // T, the type of an item
	split      func(c Codec, list any) ([][]byte, error)
	decodeItem func(c Codec, b []byte) (any, error)
	run        func(ctx Context, item any) (any, error)
	check      func(c Codec, b []byte) error
}

// EventToSend is one event of Engine.SendEvents.
type EventToSend struct {
	// Tenant is the tenant whose runs receive it.
	Tenant string
	// Key is the key the receiving steps wait for: 1-255 bytes of UTF-8
	// without control characters.
	Key string
	// Payload is encoded with the engine's Codec; the receiving steps
	// decode it into their payload type.
	Payload any
}

// SendEvent sends an event for tenant with key: every step of the
// tenant's runs waiting for key (WaitForEvent) receives payload as its
// output, exactly once, and its run goes on. It returns how many waiting
// steps received it. The event is kept for Config.EventRetention, for
// steps that begin waiting later with a lookback (WithLookback). An
// invalid tenant or key is an error matching ErrInvalidEvent, and nothing
// is sent; a payload larger than Config.MaxEventSize, ErrPayloadTooLarge.
//
// A waiting step whose payload type cannot be read from payload (a string
// where its type has a number, say) refuses it and keeps waiting, for a
// payload that fits or its timeout; its run's events record the refusal.
// SendEvent then returns the steps that received it and a *RefusedError
// (matching ErrPayloadRefused) listing the refusals: the event was sent
// all the same. The check follows encoding/json's rules; it is skipped
// with another Codec (see docs/semantics.md, "Events").
func (e *Engine) SendEvent(ctx context.Context, tenant, key string, payload any) (int, error) {
	n, err := e.SendEvents(ctx, []EventToSend{{Tenant: tenant, Key: key, Payload: payload}})
	if len(n) == 0 {
		return 0, err
	}
	return n[0], err
}

// SendEvents sends events in one atomic store call, in order: a step
// waiting for the keys of two of them receives the first. It returns, for
// each event, how many waiting steps received it; and, when some waiting
// steps refused an event (see SendEvent), those counts with a
// *RefusedError listing them.
func (e *Engine) SendEvents(ctx context.Context, events []EventToSend) ([]int, error) {
	p, err := e.eventParams(events)
	if err != nil {
		return nil, err
	}
	res, err := e.store.SendEvents(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("durable: sending events: %w", err)
	}
	e.countSettled(ctx, res.Settled)
	e.wakeClaims()
	if len(res.Refused) > 0 {
		return res.Delivered, &RefusedError{Delivered: res.Delivered, Refusals: res.Refused}
	}
	return res.Delivered, nil
}

// SendEventTx sends an event inside tx, a transaction of the caller's
// (pgx.Tx for pgstore): it is sent if and only if tx commits, and the
// engines deliver it once tx has committed. It returns how many steps were
// waiting for it when it was recorded. A store without transactions
// returns ErrTxUnsupported. The event's key stays locked until tx ends:
// keep such transactions short. Waiting steps that refuse the payload (see
// SendEvent) do so when it is delivered, after the commit: their runs'
// events record it, and SendEventTx cannot report it.
func (e *Engine) SendEventTx(ctx context.Context, tx any, tenant, key string, payload any) (int, error) {
	ts, ok := e.store.(store.TxSender)
	if !ok {
		return 0, ErrTxUnsupported
	}
	p, err := e.eventParams([]EventToSend{{Tenant: tenant, Key: key, Payload: payload}})
	if err != nil {
		return 0, err
	}
	res, err := ts.SendEventsTx(ctx, tx, p)
	if err != nil {
		return 0, fmt.Errorf("durable: sending event: %w", err)
	}
	e.countSettled(ctx, res.Settled) // none when delivered after the commit
	if len(res.Refused) > 0 {        // a store that delivers before the commit
		return res.Delivered[0], &RefusedError{Delivered: res.Delivered, Refusals: res.Refused}
	}
	return res.Delivered[0], nil
}

func (e *Engine) eventParams(events []EventToSend) (*store.SendEventsParams, error) {
	p := &store.SendEventsParams{Now: e.now(), Events: make([]store.EventMessage, len(events))}
	for k, ev := range events {
		b, err := e.cfg.Codec.Marshal(ev.Payload)
		if err != nil {
			return nil, fmt.Errorf("%w: event %d payload: %w", ErrEncode, k, err)
		}
		if err := e.checkEvent(fmt.Sprintf("the payload of event %d", k), b); err != nil {
			return nil, err
		}
		p.Events[k] = store.EventMessage{Tenant: ev.Tenant, Key: ev.Key, Payload: b}
	}
	if err := dag.CheckEvents(p.Events); err != nil {
		return nil, err
	}
	return p, nil
}

// Signal sends the signal name with payload to run id: every step of the
// run waiting for that signal (WaitForSignal) receives payload as its
// output, and the signal is kept with the run, so that a step that begins
// waiting for it later receives it too. It fails with ErrRunNotFound for
// an unknown run, ErrRunSettled for a settled one, ErrInvalidEvent for
// an invalid name, and ErrPayloadTooLarge for a payload larger than
// Config.MaxEventSize. A waiting step that cannot read the payload as
// its type refuses it and keeps waiting (see SendEvent): the signal is
// kept all the same, and Signal returns a *RefusedError listing the
// refusals.
func (e *Engine) Signal(ctx context.Context, id uuid.UUID, name string, payload any) error {
	return e.all().Signal(ctx, id, name, payload)
}

// Signal is Engine.Signal within the tenant: another tenant's run is not
// found.
func (v *TenantRuns) Signal(ctx context.Context, id uuid.UUID, name string, payload any) error {
	if v.empty() {
		return fmt.Errorf("durable: run %s: %w", id, durabletype.ErrRunNotFound)
	}
	if err := dag.CheckSignal(name); err != nil {
		return err
	}
	b, err := v.e.cfg.Codec.Marshal(payload)
	if err != nil {
		return fmt.Errorf("%w: signal payload: %w", ErrEncode, err)
	}
	if err := v.e.checkEvent("the signal's payload", b); err != nil {
		return err
	}
	res, err := v.e.store.Signal(ctx, &store.SignalParams{Now: v.e.now(), RunID: id, Tenant: v.tenant, Name: name, Payload: b})
	if err != nil {
		return fmt.Errorf("durable: run %s: signal %s: %w", id, dag.Quote(name), err)
	}
	v.e.countSettled(ctx, res.Settled)
	v.e.wakeClaims()
	if len(res.Refused) > 0 {
		return &RefusedError{Refusals: res.Refused}
	}
	return nil
}

// SendEvent is Engine.SendEvent for the tenant.
func (v *TenantRuns) SendEvent(ctx context.Context, key string, payload any) (int, error) {
	if !v.scoped {
		return 0, fmt.Errorf("%w: no tenant", durabletype.ErrInvalidEvent)
	}
	return v.e.SendEvent(ctx, v.tenant, key, payload)
}
