package durable

import (
	"fmt"
	"reflect"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Concurrency keys and rate limits. See docs/semantics.md, "Concurrency
// keys and rate limits", for the exact rules.

// WithConcurrency caps the step being declared: at most max of its tasks
// whose runs share a key (key of the run's input, computed once when the
// run is triggered) run at once across every engine sharing the store.
// The others wait, without holding a worker, in the order they became
// ready, and start as slots free. A task holds its slot from the moment it
// is admitted to the ready queue until it leaves RUNNING (it completes,
// fails, waits for a retry, is released, rescued or cancelled).
//
// I must be the workflow's input type; max must be at least 1. The key
// must be 1-200 bytes of UTF-8 without control characters: a run whose key
// function panics or returns an invalid key is not started, and the
// trigger returns an error matching ErrInvalidKey. Keys are unbounded in
// number. It does not apply to sleep steps or the on-failure handler.
func WithConcurrency[I any](key func(in I) string, max int) StepOption {
	return optionFunc(func(s *stepDef, onFailure bool) {
		switch {
		case onFailure:
			s.fail(ErrInvalidOption, "WithConcurrency does not apply to an on-failure handler")
		case key == nil:
			s.fail(ErrNilFunc, "concurrency key")
		case max < 1:
			s.fail(ErrInvalidLimit, fmt.Sprintf("concurrency %d < 1", max))
		default:
			s.conc = &keyFunc{typ: reflect.TypeFor[I](), fn: func(in any) string { return key(in.(I)) }, max: max}
		}
	})
}

// WithRateLimit limits the step being declared: at most n of its tasks
// whose runs share a key (key of the run's input) start per period per,
// across every engine sharing the store. Periods are fixed windows aligned
// to multiples of per since the Unix epoch (per = time.Minute: each
// calendar minute); a task over the limit waits durably, holding no
// worker, for the next window. The count is kept in the store, so several
// engines together respect it.
//
// n must be at least 1 and per at least a millisecond; the key follows the
// rules of WithConcurrency.
func WithRateLimit[I any](key func(in I) string, n int, per time.Duration) StepOption {
	return optionFunc(func(s *stepDef, onFailure bool) {
		switch {
		case onFailure:
			s.fail(ErrInvalidOption, "WithRateLimit does not apply to an on-failure handler")
		case key == nil:
			s.fail(ErrNilFunc, "rate-limit key")
		case n < 1 || per < time.Millisecond:
			s.fail(ErrInvalidLimit, fmt.Sprintf("rate limit %d per %s (want at least 1 per 1ms or more)", n, per))
		default:
			s.rate = &keyFunc{typ: reflect.TypeFor[I](), fn: func(in any) string { return key(in.(I)) }, max: n, per: per}
		}
	})
}

// WithConcurrency caps every step of the workflow together: at most max
// steps of its runs that share a key run at once, across every engine (a
// step with its own WithConcurrency is capped by that instead). Sleep steps
// and the on-failure handler are not capped. It returns w. Call it while
// declaring the workflow, before it is registered.
func (w *Workflow[I]) WithConcurrency(key func(in I) string, max int) *Workflow[I] {
	d := w.defn()
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.frozen:
		d.errs = append(d.errs, &DefinitionError{Workflow: d.name, Err: ErrWorkflowFrozen, Detail: "WithConcurrency"})
	case key == nil:
		d.errs = append(d.errs, &DefinitionError{Workflow: d.name, Err: ErrNilFunc, Detail: "concurrency key"})
	case max < 1:
		d.errs = append(d.errs, &DefinitionError{Workflow: d.name, Err: ErrInvalidLimit, Detail: fmt.Sprintf("concurrency %d < 1", max)})
	case d.conc != nil:
		d.errs = append(d.errs, &DefinitionError{Workflow: d.name, Err: ErrInvalidOption, Detail: "WithConcurrency set twice"})
	default:
		d.conc = &keyFunc{typ: reflect.TypeFor[I](), fn: func(in any) string { return key(in.(I)) }, max: max}
	}
	return w
}

// keyFunc is a key function of a cap (max) or a rate limit (max per per).
type keyFunc struct {
	typ reflect.Type
	fn  func(any) string
	max int
	per time.Duration
}

// stepFlow returns the cap of step s (its own, else the workflow's, for
// steps that run code, a function's body included) and the scope of its
// keys.
func (d *workflowDef) stepFlow(s *stepDef) (conc *keyFunc, scope string) {
	if s.sleep != 0 || (s.kind != "" && s.kind != durabletype.KindStep && s.kind != durabletype.KindFunc) {
		return nil, ""
	}
	if s.conc != nil {
		return s.conc, s.name
	}
	return d.conc, ""
}

// checkFlow reports the definition errors of the caps and limits of step s
// (build calls it) and records them in spec.
func (d *workflowDef) checkFlow(s *stepDef, spec *durabletype.StepSpec, stepErr func(error, string)) {
	conc, _ := d.stepFlow(s)
	for _, kf := range []*keyFunc{s.conc, s.rate, d.conc} {
		if kf != nil && d.inType != nil && kf.typ != d.inType {
			stepErr(ErrInvalidOption, fmt.Sprintf("key function takes %s, the workflow's input is %s", kf.typ, d.inType))
			return
		}
	}
	if s.sleep != 0 && (s.conc != nil || s.rate != nil) {
		stepErr(ErrInvalidOption, "a sleep step has no concurrency cap or rate limit")
		return
	}
	if conc != nil {
		spec.Concurrency = conc.max
	}
	if s.rate != nil {
		spec.Rate = &durabletype.RateLimit{N: s.rate.max, Per: s.rate.per}
	}
}

// keys computes the keys of a run's tasks from its input, or nil when no
// step has a cap or a limit. A key function that panics or returns an
// invalid key is an error matching ErrInvalidKey.
func (d *workflowDef) keys(in any) ([]store.TaskKeys, error) {
	var out []store.TaskKeys
	for i, s := range d.steps {
		conc, scope := d.stepFlow(s)
		if conc == nil && s.rate == nil {
			continue
		}
		if out == nil {
			out = make([]store.TaskKeys, len(d.steps))
		}
		var err error
		if conc != nil {
			if out[i].Concurrency, err = callKey(conc, in); err != nil {
				return nil, fmt.Errorf("%w: workflow %s: step %s: concurrency key: %w", durabletype.ErrInvalidKey, dag.Quote(d.name), dag.Quote(s.name), err)
			}
			out[i].Concurrency = dag.ScopedKey(d.name, scope, out[i].Concurrency)
		}
		if s.rate != nil {
			if out[i].Rate, err = callKey(s.rate, in); err != nil {
				return nil, fmt.Errorf("%w: workflow %s: step %s: rate-limit key: %w", durabletype.ErrInvalidKey, dag.Quote(d.name), dag.Quote(s.name), err)
			}
			out[i].Rate = dag.ScopedKey(d.name, s.name, out[i].Rate)
		}
	}
	return out, nil
}

// callKey calls a key function, turning a panic and an invalid key into
// errors.
func callKey(kf *keyFunc, in any) (key string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("key function panicked: %v", p)
		}
	}()
	key = kf.fn(in)
	if !dag.ValidFlowKey(key) {
		return "", fmt.Errorf("%s: want 1-%d bytes of UTF-8 without control characters", dag.Quote(key), dag.MaxFlowKeyLen)
	}
	return key, nil
}
