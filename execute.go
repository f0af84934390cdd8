package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

func randFloat() float64 { return rand.Float64() }

// runStep runs one claimed task and returns its outcome. Nothing it does can
// panic the worker: user code runs under recover, and bad data (an input or
// output that does not decode, a step this process does not know) fails the
// step with a clear, non-retried error. It calls begin before it runs the
// step's code (or computes what the step waits for), once the step's skip
// conditions did not fire; a step skipped on its worker never begins. For a
// TxStep whose outcome the store recorded in the step's transaction, it
// sets *recorded to its result.
func (e *Engine) runStep(ctx context.Context, cancel context.CancelCauseFunc, lose func(error), c *store.ClaimedTask, begin func(), recorded **store.FinishResult,
	checkpoint func(context.Context, store.Outcome) (store.FinishResult, error)) store.Outcome {
	o := store.Outcome{Task: c.Ref()}
	terminal := func(err error) store.Outcome { return failTerminal(o, err) }
	d := e.workflowVersion(c.Workflow, c.Version)
	if d == nil {
		return terminal(fmt.Errorf("%w: workflow %q is not registered at version %q", ErrUnknownStep, c.Workflow, c.Version))
	}
	sc := &stepContext{Context: ctx, e: e, claim: c, cancel: cancel, lose: lose, begin: begin, recorded: recorded, checkpoint: checkpoint}
	if c.Kind == durabletype.KindItem {
		return e.runItem(sc, d, o)
	}
	in, err := d.decodeInput(e.cfg.Codec, c.Input)
	if err != nil {
		return terminal(fmt.Errorf("%w: input of workflow %q: %w", ErrDecode, c.Workflow, err))
	}
	// Built only when there is something to log: With formats its
	// attributes at once, which would cost every step.
	log := func() *slog.Logger {
		return e.log.With("run_id", c.RunID.String(), "step", c.Step, "attempt", c.Attempt)
	}

	if c.Kind == durabletype.KindFunc {
		begin()
		return e.runFunc(sc, d, in, o)
	}

	if c.Kind == durabletype.KindOnFailure {
		h := d.onFailure
		if h == nil {
			return terminal(fmt.Errorf("%w: workflow %q has no on-failure handler", ErrUnknownStep, c.Workflow))
		}
		begin()
		err := protect(func() error { return h.onFailure(sc, in, Failure{Step: c.FailedStep, Error: c.Error}) })
		if err := sc.misused(); err != nil {
			return terminal(err)
		}
		if err != nil {
			log().Warn("durable: on-failure handler failed", "error", err)
			return e.failed(ctx, o, err)
		}
		o.Kind = store.OutcomeComplete
		return o
	}

	s := d.byName[c.Step]
	if s == nil || !s.runs(c.Kind) {
		what := "a step"
		if c.Kind != durabletype.KindStep {
			what = "a " + string(c.Kind) + " step"
		}
		return terminal(fmt.Errorf("%w: step %q of workflow %q is not %s in this process's definition", ErrUnknownStep, c.Step, c.Workflow, what))
	}
	sc.step = s
	sc.parents = make(map[*stepDef]any, len(s.parents))
	for _, p := range s.parents {
		var v any
		var err error
		if p.kind == durabletype.KindMap {
			items, ok := c.ParentItems[p.name]
			if !ok {
				continue // skipped
			}
			v, err = p.decodeItems(e.cfg.Codec, items)
		} else {
			b, ok := c.ParentOutputs[p.name]
			if !ok {
				continue // skipped (or not a parent in the run's recorded shape)
			}
			v, err = p.decodeOutput(e.cfg.Codec, b)
		}
		if err != nil {
			return terminal(fmt.Errorf("%w: output of parent %q: %w", ErrDecode, p.name, err))
		}
		sc.parents[p] = v
	}
	for _, cond := range s.skips {
		v, ok := sc.parents[cond.parent]
		if !ok {
			continue
		}
		var fire bool
		if err := protect(func() error { fire = cond.pred(v); return nil }); err != nil {
			return terminal(fmt.Errorf("skip condition on %q: %w", cond.parent.name, err))
		}
		if fire {
			o.Kind, o.Reason = store.OutcomeSkip, fmt.Sprintf("skip condition on %q fired", cond.parent.name)
			return o
		}
	}

	switch c.Kind {
	case durabletype.KindEvent:
		begin()
		return e.runWait(sc, s, in, o)
	case durabletype.KindChild:
		begin()
		return e.runChild(sc, s, in, o)
	case durabletype.KindMap:
		return e.runMap(sc, s, in, o) // skipped when its list was
	}
	begin()
	if s.txRun != nil {
		return e.runTx(sc, s, in, o)
	}
	return e.stepOutcome(sc, s, o, func() (any, error) { return s.run(sc, in) })
}

// stepOutcome runs a step's code (run) and turns what it returns into the
// step's outcome.
func (e *Engine) stepOutcome(sc *stepContext, s *stepDef, o store.Outcome, run func() (any, error)) store.Outcome {
	c := sc.claim
	terminal := func(err error) store.Outcome { return failTerminal(o, err) }
	var out any
	err := protect(func() error {
		var err error
		out, err = run()
		return err
	})
	if err := sc.misused(); err != nil {
		return terminal(err)
	}
	if err != nil {
		e.log.Debug("durable: step failed", "run_id", c.RunID.String(), "step", c.Step, "attempt", c.Attempt, "error", err)
		return e.failed(sc, o, err)
	}
	b, err := e.cfg.Codec.Marshal(out)
	if err != nil {
		return terminal(fmt.Errorf("%w: output of step %q: %w", ErrEncode, c.Step, err))
	}
	if err := e.checkOutput(fmt.Sprintf("the output of step %q", c.Step), b); err != nil {
		return terminal(err)
	}
	if _, err := s.decodeOutput(e.cfg.Codec, b); err != nil {
		return terminal(fmt.Errorf("%w: output of step %q does not decode back into its type: %w", ErrEncode, c.Step, err))
	}
	o.Kind, o.Output = store.OutcomeComplete, b
	return o
}

// failTerminal returns o as a failure of its step that is not retried.
func failTerminal(o store.Outcome, err error) store.Outcome {
	o.Kind, o.Error, o.Terminal = store.OutcomeFail, err.Error(), true
	return o
}

// failed turns a step error into an outcome: a retryable or terminal
// failure, or a release when the engine cancelled the step on a hard stop.
func (e *Engine) failed(ctx context.Context, o store.Outcome, err error) store.Outcome {
	if errors.Is(context.Cause(ctx), ErrEngineStopped) {
		o.Kind = store.OutcomeRelease
		return o
	}
	o.Kind, o.Error, o.Terminal, o.Rand = store.OutcomeFail, err.Error(), IsTerminal(err), randFloat()
	return o
}

// errGoexit is the error of a step whose goroutine ended by
// runtime.Goexit, as t.FailNow and t.SkipNow do, instead of returning.
var errGoexit = errors.New("durable: the step called runtime.Goexit (t.FailNow, t.Fatal or t.SkipNow inside a step?) instead of returning")

// errPanic wraps a panic in user code.
type errPanic struct {
	value any
	stack []byte
}

func (p *errPanic) Error() string { return fmt.Sprintf("panic: %v\n%s", p.value, p.stack) }

func protect(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &errPanic{value: r, stack: debug.Stack()}
		}
	}()
	return fn()
}
