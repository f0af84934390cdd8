package dag

import (
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// What operators do to runs (store.Store.ActOnRuns), written once: a
// driver locks and loads the runs a call names, Change.Act applies the
// action to each through the call's change, and the driver commits it
// (Commit) as one atomic unit.

// transitions holds the transition of each operator action: how it
// applies to one run, with the call's inputs. A RunAction missing here is
// refused by CheckAction, and TestActionsHaveTransitions fails for it.
var transitions = map[durabletype.RunAction]func(r *Run, p *store.ActOnRunsParams, now time.Time) (Effects, error){
	durabletype.ActionCancel: func(r *Run, p *store.ActOnRunsParams, now time.Time) (Effects, error) {
		return r.Cancel(p.Reason, now)
	},
	durabletype.ActionReplay: func(r *Run, p *store.ActOnRunsParams, now time.Time) (Effects, error) {
		return r.Replay(p.FromStep, now)
	},
	durabletype.ActionUpgrade: func(r *Run, p *store.ActOnRunsParams, now time.Time) (Effects, error) {
		return r.Upgrade(p.Version, p.To, now)
	},
}

// CheckAction checks the params of an action before any run is touched:
// the action is known, and an upgrade names the shape to move to
// (CheckTarget).
func CheckAction(p *store.ActOnRunsParams) error {
	if _, ok := transitions[p.Action]; !ok {
		return fmt.Errorf("%w: unknown run action %s", durabletype.ErrInvalidRun, Quote(string(p.Action)))
	}
	if p.Action == durabletype.ActionUpgrade {
		if err := CheckTarget(p.To); err != nil {
			return fmt.Errorf("upgrade: %w", err)
		}
	}
	return nil
}

// Act applies the action of p to the runs p.IDs names, in order, through
// c, and reports what it did to each (Settled is the driver's to fill in
// once the change commits). run returns the loaded run of an ID, nil when
// the call loaded none (it does not exist). An ID named twice meets the
// run as the first changed it. For each run, in this order:
//
//  1. a run not found, or of another tenant than p.Tenant (when set), is
//     ErrRunNotFound;
//  2. a run at another version than p.Version (when set) is
//     ErrVersionMismatch;
//  3. a run whose status does not allow the action
//     (durabletype.RunStatus.Allows) is refused: ErrRunSettled when it has
//     settled, ErrRunNotSettled when it has not;
//  4. the action's transition applies, and may refuse the run for reasons
//     of its own (ErrNothingToReplay, an *UpgradeError, ...).
//
// A run whose status settled before it did (FAILED while its on-failure
// handler waits or runs) is not judged by its status in step 3: the
// transitions judge it (Cancel cancels it, Replay and Upgrade refuse it).
//
// Act fails, changing nothing, when p is invalid (CheckAction).
func (c *Change) Act(p *store.ActOnRunsParams, run func(id uuid.UUID) *Run) ([]store.RunActionResult, error) {
	if err := CheckAction(p); err != nil {
		return nil, err
	}
	apply := transitions[p.Action]
	out := make([]store.RunActionResult, len(p.IDs))
	for k, id := range p.IDs {
		out[k].ID = id
		r := run(id)
		switch {
		case r == nil:
			out[k].Err = durabletype.ErrRunNotFound
			if l, ok := c.left[id]; ok && (p.Tenant == "" || l.tenant == p.Tenant) {
				out[k].Err = l.err
			}
			continue
		case p.Tenant != "" && r.Rec.Tenant != p.Tenant:
			out[k].Err = durabletype.ErrRunNotFound
			continue
		case p.Version != "" && r.Rec.Version != p.Version:
			out[k].Err = durabletype.ErrVersionMismatch
			continue
		}
		if err := refusal(&r.Rec, p.Action); err != nil {
			out[k].Err = err
			continue
		}
		fx, err := apply(r, p, c.Now)
		if err != nil {
			out[k].Err = err
			continue
		}
		c.Add(r, fx)
	}
	return out, nil
}

// refusal returns why run rec's status does not allow action a
// (ErrRunSettled for a settled run, ErrRunNotSettled for one that has
// not), or nil when it allows it or the run is between statuses (see
// Act).
func refusal(rec *store.Run, a durabletype.RunAction) error {
	switch {
	case rec.Status.Settled() != rec.Settled():
		return nil // FAILED, its on-failure handler not done: the transition judges
	case rec.Status.Allows(a):
		return nil
	case rec.Settled():
		return durabletype.ErrRunSettled
	default:
		return durabletype.ErrRunNotSettled
	}
}
