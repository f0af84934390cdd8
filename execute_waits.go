package durable

import (
	"fmt"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// runs reports whether step s is what a claimed task of kind runs.
func (s *stepDef) runs(kind durabletype.TaskKind) bool {
	switch kind {
	case durabletype.KindEvent, durabletype.KindChild, durabletype.KindMap, durabletype.KindFunc:
		return s.kind == kind
	}
	return (s.run != nil || s.txRun != nil) && (s.kind == "" || s.kind == durabletype.KindStep)
}

// runWait runs a WaitForEvent or WaitForSignal step: it computes the key of
// the event to wait for (a signal has its name), and the store makes the
// step wait.
func (e *Engine) runWait(sc *stepContext, s *stepDef, in any, o store.Outcome) store.Outcome {
	if s.wait.signal != "" {
		o.Kind = store.OutcomeWait
		return o
	}
	var key string
	err := protect(func() error {
		var err error
		key, err = s.wait.key(sc, in)
		return err
	})
	if err := sc.misused(); err != nil {
		return terminalOutcome(o, err)
	}
	if err != nil {
		return e.failed(sc, o, fmt.Errorf("event key: %w", err))
	}
	if !dag.ValidEventKey(key) {
		return terminalOutcome(o, fmt.Errorf("%w: the event key %s of step %q: use 1-%d bytes of UTF-8 without control characters",
			durabletype.ErrInvalidEvent, dag.Quote(key), s.name, dag.MaxEventKeyLen))
	}
	o.Kind, o.Key = store.OutcomeWait, key
	return o
}

// runChild runs a Child step: it computes the child's input, and the store
// starts the child run and makes the step wait for it.
func (e *Engine) runChild(sc *stepContext, s *stepDef, in any, o store.Outcome) store.Outcome {
	c := s.child
	shape, err := e.shapeOf(c.wf)
	if err != nil {
		return terminalOutcome(o, fmt.Errorf("child workflow %q: %w", c.wf.name, err))
	}
	var v any
	err = protect(func() error {
		var err error
		v, err = c.input(sc, in)
		return err
	})
	if err := sc.misused(); err != nil {
		return terminalOutcome(o, err)
	}
	if err != nil {
		return e.failed(sc, o, fmt.Errorf("child input: %w", err))
	}
	b, keys, err := c.encode(e, v)
	if err != nil {
		return terminalOutcome(o, err)
	}
	if err := e.checkInput(fmt.Sprintf("the input of the child run of step %q", s.name), b); err != nil {
		return terminalOutcome(o, err)
	}
	o.Kind = store.OutcomeSpawn
	o.Child = &store.NewRun{Workflow: c.wf.name, Input: b, Shape: shape, Keys: keys, TraceParent: e.tel.traceParent(sc)}
	return o
}

// runMap runs a Map or MapInput step: it takes its list (its parent's
// output, or what MapInput's selector picks from the run's input in),
// splits it into items, and the store creates their tasks and makes the
// step wait for them. The items are fixed when the fan-out is recorded;
// an attempt that lost its worker before takes its list again, from the
// same parent output or input.
func (e *Engine) runMap(sc *stepContext, s *stepDef, in any, o store.Outcome) store.Outcome {
	m := s.mapDef
	var list any
	if m.over != nil {
		var ok bool
		if list, ok = sc.parents[m.over]; !ok {
			o.Kind, o.Reason = store.OutcomeSkip, fmt.Sprintf("the list step %q was skipped", m.over.name)
			return o
		}
		sc.begin()
	} else {
		sc.begin()
		// The selector reads the input only: the same input selects the
		// same items, and a panic would panic again, so it is not retried.
		if err := protect(func() error { list = m.input(in); return nil }); err != nil {
			return terminalOutcome(o, fmt.Errorf("map step %q: selecting its items from the run's input: %w", s.name, err))
		}
	}
	var items [][]byte
	err := protect(func() error {
		var err error
		items, err = m.split(e.cfg.Codec, list)
		return err
	})
	if err != nil {
		return terminalOutcome(o, err)
	}
	if len(items) > dag.MaxItems {
		return terminalOutcome(o, fmt.Errorf("%w: the list of %d items exceeds the %d a map step takes", ErrInvalidOption, len(items), dag.MaxItems))
	}
	o.Kind, o.Items = store.OutcomeFanOut, items
	return o
}

// runItem runs a map step's function on one item.
func (e *Engine) runItem(sc *stepContext, d *workflowDef, o store.Outcome) store.Outcome {
	c := sc.claim
	s := d.byName[c.Map]
	if s == nil || s.kind != durabletype.KindMap || s.mapDef == nil {
		return terminalOutcome(o, fmt.Errorf("%w: step %q of workflow %q is not a map step in this process's definition", ErrUnknownStep, c.Map, c.Workflow))
	}
	m := s.mapDef
	sc.step, sc.item = s, true
	item, err := m.decodeItem(e.cfg.Codec, c.Input)
	if err != nil {
		return terminalOutcome(o, fmt.Errorf("%w: item %d of step %q: %w", ErrDecode, c.Item, c.Map, err))
	}
	sc.begin()
	var out any
	err = protect(func() error {
		var err error
		out, err = m.run(sc, item)
		return err
	})
	if err := sc.misused(); err != nil {
		return terminalOutcome(o, err)
	}
	if err != nil {
		return e.failed(sc, o, err)
	}
	b, err := e.cfg.Codec.Marshal(out)
	if err != nil {
		return terminalOutcome(o, fmt.Errorf("%w: output of item %d of step %q: %w", ErrEncode, c.Item, c.Map, err))
	}
	if err := e.checkOutput(fmt.Sprintf("the output of item %d of step %q", c.Item, c.Map), b); err != nil {
		return terminalOutcome(o, err)
	}
	if err := m.check(e.cfg.Codec, b); err != nil {
		return terminalOutcome(o, fmt.Errorf("%w: output of item %d of step %q does not decode back into its type: %w", ErrEncode, c.Item, c.Map, err))
	}
	o.Kind, o.Output = store.OutcomeComplete, b
	return o
}

func terminalOutcome(o store.Outcome, err error) store.Outcome {
	o.Kind, o.Error, o.Terminal = store.OutcomeFail, err.Error(), true
	return o
}
