package dag

import (
	"context"
	"fmt"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// The runner: what every transition does between deciding and writing,
// written once. A driver (memstore, pgstore) locks and loads the runs of a
// call, the core's transitions change them through a Change, and then
// Commit completes the change inside the same atomic unit, in this order:
//
//  1. resolve: each task that began waiting receives the first kept
//     message it may (Run.WaitQuery, Tx.FirstMessages); each child run a
//     transition started joins the change, created as CreateRuns would
//     create it (Tx.NewRun, StartKeyed). Both repeat until nothing new
//     waits or spawns: a message delivered may start the next wait, a child
//     may begin with one.
//  2. check: a run whose items could not be loaded fails the call.
//  3. admit: the keyed tasks go through their rate limits and concurrency
//     caps (CollectAdmission), on the counters the driver locked
//     (Tx.Counters); the decision is the change's Admitted.
//  4. write: the driver writes the change (Tx.Write).
//
// The driver decides nothing: it answers lookups and writes what the
// change says.

// Tx is the I/O of one atomic unit, as the runner needs it. Each method
// reads or writes what it is told, under the unit's locks. A Tx serves
// one change: Commit passes SlotsBefore and Write the change it was given.
// A driver that keeps with its Tx what it needs to write that change
// beyond the Change (pgstore's lanes, fair ids, event ids) fails Write
// when passed a change other than its unit's.
type Tx interface {
	// FirstMessages returns, for each query in order, the first kept
	// message the wait may receive (Found.OK false when there is none). It
	// takes the locks that keep the answer true until the unit ends: an
	// event sent meanwhile either finds the task waiting or is found.
	FirstMessages(ctx context.Context, qs []WaitQuery) ([]Found, error)
	// NewRun prepares the creation of a child run with the unit: it
	// returns the run's compiled shape, recorded with the unit's writes,
	// and makes the run's tenant known to the fair queue. A child's ID is
	// its parent's, step's and claim's (ChildID), so it never exists
	// already; if it did, the unit fails (ErrRunExists) rather than
	// replace it.
	NewRun(ctx context.Context, nr *store.NewRun, now time.Time) (*Compiled, error)
	// SlotsBefore returns which keyed tasks of the change's runs were
	// RUNNING as loaded, before the call's transitions (HeldSlots).
	SlotsBefore(c *Change) SlotsBefore
	// Counters locks and reads the per-key counters admission decides
	// on (see Counters), for w; heads is, per concurrency key, how many of
	// its oldest parked tasks the call may promote. It takes the dequeued
	// keyed tasks (w.Dequeued) out of the queue, wherever each is.
	Counters(ctx context.Context, w *Admission, heads map[string]int) (*Counters, error)
	// Write persists the change.
	Write(ctx context.Context, c *Change) error
}

// Found is the first kept message a wait may receive.
type Found struct {
	OK      bool
	Payload []byte
}

// Counters are the per-key counters admission decides on, as locked by
// the driver.
type Counters struct {
	// Used holds the admissions so far of each window of
	// Admission.RateKeys.
	Used map[RateKey]int
	// Held holds the slots held of each key of Admission.SlotKeys.
	Held map[string]int
	// Admitted tells, of each dequeued keyed task, whether it held a slot
	// (it was in the ready queue) rather than a place among the parked.
	Admitted map[TaskAt]bool
	// Parked is, per key, how many parked tasks the call may promote: at
	// most what heads asked for.
	Parked map[string]int
}

// Admitted is what admission decided for a change: the driver writes it
// with the change.
type Admitted struct {
	*Admission
	// Used holds each window's admissions after the call.
	Used     map[RateKey]int
	Decision *AdmitDecision
}

// A RuleError is the core refusing a change in Commit: a run whose items
// could not be loaded, a child run that cannot be created. Its text is
// the refusal's. The errors of the driver's Tx (its I/O) come out of
// Commit as the driver returned them, so that a driver tells the two
// apart by type (errors.As), not by text.
type RuleError struct{ Err error }

func (e *RuleError) Error() string { return e.Err.Error() }

// Unwrap returns the refusal.
func (e *RuleError) Unwrap() error { return e.Err }

// Commit completes change c inside the driver's atomic unit tx and writes
// it (see the steps above). The core's refusals are *RuleError; the
// errors of tx's methods are returned unchanged.
func Commit(ctx context.Context, tx Tx, c *Change) error {
	if err := c.resolve(ctx, tx); err != nil {
		return err
	}
	for _, r := range c.Runs {
		if err := r.Err(); err != nil {
			return &RuleError{err}
		}
	}
	if err := c.admit(ctx, tx); err != nil {
		return err
	}
	return tx.Write(ctx, c)
}

// resolve delivers the first kept message of each beginning wait and
// creates the child runs the transitions started, until neither is left.
func (c *Change) resolve(ctx context.Context, tx Tx) error {
	var refused []skipped // waits that refused the message they found
	for {
		var at []TaskAt
		var qs []WaitQuery
		var spawned []store.NewRun
		for _, sk := range refused {
			// Look again past the messages refused.
			if t := sk.R.Task(sk.I); t.State == durabletype.TaskWaiting && t.WaitKey != "" {
				q := sk.R.WaitQuery(sk.I, c.Now)
				q.Skip = sk.skip
				at, qs = append(at, sk.TaskAt), append(qs, q)
			}
		}
		refused = nil
		for _, r := range c.Runs {
			fx := c.Effects[r]
			for _, i := range fx.Waits {
				if t := r.Task(i); t.State == durabletype.TaskWaiting && t.WaitKey != "" {
					at = append(at, TaskAt{r, i})
					qs = append(qs, r.WaitQuery(i, c.Now))
				}
			}
			spawned = append(spawned, fx.Spawned...)
			fx.Waits, fx.Spawned = nil, nil
		}
		if len(qs) == 0 && len(spawned) == 0 {
			return nil
		}
		if len(qs) > 0 {
			found, err := tx.FirstMessages(ctx, qs)
			if err != nil {
				return err
			}
			for n, f := range found {
				if !f.OK {
					continue
				}
				r, i := at[n].R, at[n].I
				fx, ok := r.Deliver(i, r.Task(i).Token, f.Payload, c.Now)
				if !ok && len(fx.Refused) > 0 && qs[n].Skip < MaxSkips {
					refused = append(refused, skipped{TaskAt: at[n], skip: qs[n].Skip + 1})
				}
				c.Add(r, fx)
			}
		}
		for k := range spawned {
			if err := c.spawn(ctx, tx, &spawned[k]); err != nil {
				return &RuleError{err}
			}
		}
	}
}

// skipped is a wait that refused the first skip messages it found.
type skipped struct {
	TaskAt
	skip int
}

// spawn adds child run nr to the change, as CreateRuns would create it.
func (c *Change) spawn(ctx context.Context, tx Tx, nr *store.NewRun) error {
	for _, r := range c.Runs {
		if r.Rec.ID == nr.ID {
			return nil
		}
	}
	if err := CheckNewRun(nr); err != nil {
		return fmt.Errorf("child run %s: %w", nr.ID, err)
	}
	if err := CheckKeys(nr); err != nil {
		return fmt.Errorf("child run %s: %w", nr.ID, err)
	}
	shape, err := tx.NewRun(ctx, nr, c.Now)
	if err != nil {
		return fmt.Errorf("child run %s: %w", nr.ID, err)
	}
	rec := NewRecord(nr, shape, c.Now)
	rec.Parent = nr.Parent
	r, fx := StartKeyed(rec, shape, nr.Keys, c.Now, time.Time{})
	c.Add(r, fx)
	return nil
}

// admit runs admission for a change that involves keyed tasks; others
// cost nothing more.
func (c *Change) admit(ctx context.Context, tx Tx) error {
	c.Admitted = nil
	w := CollectAdmission(c, tx.SlotsBefore(c))
	if w == nil {
		return nil
	}
	cn, err := tx.Counters(ctx, w, w.Heads())
	if err != nil {
		return err
	}
	used := cn.Used
	if used == nil {
		used = map[RateKey]int{}
	}
	w.Limit(c, used)
	d := w.Decide(c, cn.Held, func(t KeyedTask) bool { return cn.Admitted[t.TaskAt] }, cn.Parked)
	c.Admitted = &Admitted{Admission: w, Used: used, Decision: d}
	return nil
}
