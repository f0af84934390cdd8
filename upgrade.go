package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Moving runs from one version of their workflow to another: on demand
// (UpgradeRuns), and by the engines that register a definition accepting
// older versions (Workflow.Accepts), in the background.

// UpgradeOptions are the options of UpgradeRuns.
type UpgradeOptions struct {
	// IDs, when set, moves only these runs instead of every run of the
	// version that has not settled; each must be at the version moved from
	// (else it is refused with ErrVersionMismatch).
	IDs []uuid.UUID
	// DryRun checks every run and reports what would move and what would
	// be refused, moving none.
	DryRun bool
}

// UpgradeResult says what UpgradeRuns did.
type UpgradeResult struct {
	// Moved lists the runs that moved (with DryRun, that would move).
	Moved []uuid.UUID
	// Refused lists the runs that could not move, with the reason: an
	// error matching ErrIncompatible that names the step at fault,
	// ErrVersionMismatch, ErrRunSettled or ErrRunNotFound.
	Refused []UpgradeRefusal
}

// UpgradeRefusal is a run that an upgrade did not move, and why.
type UpgradeRefusal struct {
	RunID uuid.UUID
	Err   error
}

// UpgradeRuns moves the runs of workflow pinned to version from that have
// not settled to version to, in batches of 100 runs, each batch one atomic
// unit (a crash leaves a batch moved or not, never in part): from then on,
// only the engines serving version to run their steps. A run moves with what it
// has done: finished steps keep their outputs (a finished step that version
// to lacks or changed is kept for its record, retired, and never runs
// again), steps to adds are created and run once their parents are done,
// and steps running or waiting go on where they are. A run whose
// unfinished steps version to cannot run the same way (a step missing, of
// another kind, with other parents, or reading a finished step's output as
// another type) is refused and stays at its version; so is a run that
// failed. The shape of version to is this engine's, if it registered that
// version, else the one recorded by runs started at it (ErrUnknownVersion
// if there is neither).
func (e *Engine) UpgradeRuns(ctx context.Context, workflow, from, to string, opts UpgradeOptions) (*UpgradeResult, error) {
	return e.all().UpgradeRuns(ctx, workflow, from, to, opts)
}

// UpgradeRuns is Engine.UpgradeRuns within the tenant.
func (v *TenantRuns) UpgradeRuns(ctx context.Context, workflow, from, to string, opts UpgradeOptions) (*UpgradeResult, error) {
	if err := dag.NameRule.Check("workflow", workflow); err != nil {
		return nil, err
	}
	if err := dag.VersionRule.Check("from", from); err != nil {
		return nil, err
	}
	if err := dag.VersionRule.Check("to", to); err != nil {
		return nil, err
	}
	switch {
	case from == to:
		return nil, fmt.Errorf("%w: runs move from version %s to itself", ErrInvalidOption, dag.Quote(from))
	}
	shape, err := v.e.targetShape(ctx, workflow, to)
	if err != nil {
		return nil, err
	}
	return v.upgrade(ctx, workflow, from, shape, opts)
}

// targetShape returns the shape of version v of workflow: as registered
// on e, else as the store recorded it.
func (e *Engine) targetShape(ctx context.Context, workflow, v string) (*durabletype.Shape, error) {
	e.mu.Lock()
	x := e.reg.version(workflow, v)
	e.mu.Unlock()
	if x != nil {
		return x.shape, nil
	}
	vs, ok := e.store.(store.Versioner)
	if !ok {
		return nil, fmt.Errorf("%w: the store keeps no versions", ErrUnknownVersion)
	}
	res, err := vs.ListVersions(ctx, &store.ListVersionsParams{Workflow: workflow})
	if err != nil {
		return nil, fmt.Errorf("durable: versions of workflow %s: %w", dag.Quote(workflow), err)
	}
	// A shape as a run started at v recorded it: without retired steps,
	// which only runs moved to v have.
	for _, rec := range res.Versions {
		if rec.Version == v && rec.Shape != nil && !slices.ContainsFunc(rec.Shape.Steps, func(s durabletype.StepSpec) bool { return s.Retired }) {
			return rec.Shape, nil
		}
	}
	return nil, fmt.Errorf("%w: workflow %s has no version %s registered on this engine or recorded by a run",
		ErrUnknownVersion, dag.Quote(workflow), dag.Quote(v))
}

// upgrade moves the runs of workflow at version from (opts.IDs, or every
// one that has not settled) to shape, a page at a time.
func (v *TenantRuns) upgrade(ctx context.Context, workflow, from string, shape *durabletype.Shape, opts UpgradeOptions) (*UpgradeResult, error) {
	out := &UpgradeResult{}
	act := func(ids []uuid.UUID) error {
		if opts.DryRun {
			return v.e.tryUpgrade(ctx, v, ids, from, shape, out)
		}
		res, err := v.act(ctx, &store.ActOnRunsParams{Action: durabletype.ActionUpgrade, IDs: ids, Version: from, To: shape})
		if err != nil {
			return fmt.Errorf("durable: upgrade runs: %w", err)
		}
		for _, r := range res {
			if r.Err == nil {
				out.Moved = append(out.Moved, r.ID)
			} else {
				out.Refused = append(out.Refused, UpgradeRefusal{RunID: r.ID, Err: r.Err})
			}
		}
		return nil
	}
	defer v.e.wakeClaims()
	if len(opts.IDs) > 0 {
		if v.empty() {
			for _, id := range opts.IDs {
				out.Refused = append(out.Refused, UpgradeRefusal{RunID: id, Err: durabletype.ErrRunNotFound})
			}
			return out, nil
		}
		for ids := range slices.Chunk(opts.IDs, bulkBatch) {
			if err := act(ids); err != nil {
				return out, err
			}
		}
		return out, nil
	}
	allows := func(s durabletype.RunStatus) bool { return s.Allows(durabletype.ActionUpgrade) }
	page := ListOptions{RunFilter: RunFilter{Workflow: workflow, Version: from, Statuses: durabletype.RunStatusesWhere(allows)}, Limit: bulkBatch}
	for {
		res, err := v.ListRuns(ctx, page)
		if err != nil {
			return out, err
		}
		ids := make([]uuid.UUID, len(res.Runs))
		for i, r := range res.Runs {
			ids[i] = r.ID
		}
		if len(ids) > 0 {
			if err := act(ids); err != nil {
				return out, err
			}
		}
		if res.Next == "" {
			return out, nil
		}
		page.Cursor = res.Next
	}
}

// versioner returns the store's list of recorded versions, nil if it
// keeps none.
func (e *Engine) versioner() store.Versioner {
	vs, _ := e.store.(store.Versioner)
	return vs
}

// tryUpgrade applies the upgrade (dag.Change.Act) to copies of the runs,
// as read now, and records what it says in out: a dry run.
func (e *Engine) tryUpgrade(ctx context.Context, v *TenantRuns, ids []uuid.UUID, from string, to *durabletype.Shape, out *UpgradeResult) error {
	for _, id := range ids {
		err := e.checkUpgrade(ctx, v, id, from, to)
		switch {
		case err == nil:
			out.Moved = append(out.Moved, id)
		case errors.Is(err, durabletype.ErrRunNotFound), errors.Is(err, durabletype.ErrIncompatible),
			errors.Is(err, durabletype.ErrVersionMismatch), errors.Is(err, durabletype.ErrRunSettled):
			out.Refused = append(out.Refused, UpgradeRefusal{RunID: id, Err: err})
		default:
			return err
		}
	}
	return nil
}

// checkUpgrade says whether run id would move from version from to to.
func (e *Engine) checkUpgrade(ctx context.Context, v *TenantRuns, id uuid.UUID, from string, to *durabletype.Shape) error {
	run, err := e.store.GetRun(ctx, id)
	if v.scoped && otherTenant(run, err, v.tenant) {
		return fmt.Errorf("durable: run %s: %w", id, durabletype.ErrRunNotFound)
	}
	if err != nil {
		return fmt.Errorf("durable: run %s: %w", id, err)
	}
	tasks, err := e.store.ListTasks(ctx, id)
	if err != nil {
		return fmt.Errorf("durable: run %s: %w", id, err)
	}
	shape, err := dag.Compile(run.Shape)
	if err != nil {
		return fmt.Errorf("durable: run %s: %w", id, err)
	}
	var steps []store.Task
	for _, t := range tasks {
		if t.Kind != durabletype.KindItem {
			steps = append(steps, *t)
		}
	}
	r, err := dag.Load(*run, shape, steps)
	if err != nil {
		return fmt.Errorf("durable: run %s: %w", id, err)
	}
	// The rule of the move itself, on a copy that nothing writes.
	p := &store.ActOnRunsParams{Action: durabletype.ActionUpgrade, IDs: []uuid.UUID{id}, Tenant: v.tenant, Version: from, To: to}
	res, err := dag.NewChange(time.Now()).Act(p, func(uuid.UUID) *dag.Run { return r })
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		return fmt.Errorf("durable: run %s: %w", id, err)
	}
	return nil
}

// Moving the runs that registered definitions accept.

// upgradeLoop moves, for each version a registered definition accepts,
// the runs pinned to it that have not settled, at start and whenever a
// registration adds an acceptance, then again after a pause: a second
// after a pass that moved runs, doubling up to upgradeMaxPause after
// passes that moved none (runs of an accepted version keep coming while
// engines of that version still start them). Runs that cannot move are
// logged once each and left at their version. It returns when ctx is
// done; an engine that accepts nothing waits for a registration only.
func (e *Engine) upgradeLoop(ctx context.Context, rt *runtime) {
	pause := time.Second
	refused := map[uuid.UUID]bool{}
	for {
		e.mu.Lock()
		accepted := e.reg.acceptances()
		e.mu.Unlock()
		var wake <-chan time.Time
		var t *time.Timer
		if len(accepted) > 0 {
			moved := 0
			for _, a := range accepted {
				moved += e.upgradePass(ctx, a, refused)
			}
			if moved > 0 {
				pause = time.Second
			} else {
				pause = min(2*pause, upgradeMaxPause)
			}
			t = time.NewTimer(pause)
			wake = t.C
		}
		select {
		case <-ctx.Done():
		case <-rt.upgradeSig:
			pause = time.Second
		case <-wake:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// upgradeMaxPause is the longest pause between two passes of the upgrade
// loop.
const upgradeMaxPause = time.Minute

// maxRefusedRemembered bounds the runs the upgrade loop remembers having
// logged as refused.
const maxRefusedRemembered = 10_000

// upgradePass moves the runs of one accepted version and returns how many
// moved.
func (e *Engine) upgradePass(ctx context.Context, a acceptance, refused map[uuid.UUID]bool) int {
	res, err := e.all().upgrade(ctx, a.workflow, a.from, a.to.shape, UpgradeOptions{})
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("durable: moving the runs of an accepted version", slog.String("workflow", a.workflow),
				slog.String("from", a.from), slog.String("to", a.to.shape.Version), slog.Any("error", err))
		}
		if res == nil {
			return 0
		}
	}
	for _, r := range res.Refused {
		if refused[r.RunID] || errors.Is(r.Err, durabletype.ErrVersionMismatch) || errors.Is(r.Err, durabletype.ErrRunNotFound) {
			continue // moved or gone meanwhile
		}
		if len(refused) >= maxRefusedRemembered {
			clear(refused)
		}
		refused[r.RunID] = true
		e.log.Warn("durable: a run of an accepted version cannot move; it stays at its version",
			slog.String("run_id", r.RunID.String()), slog.String("workflow", a.workflow),
			slog.String("from", a.from), slog.String("to", a.to.shape.Version), slog.Any("error", r.Err))
	}
	if n := len(res.Moved); n > 0 {
		e.log.Info("durable: moved runs of an accepted version", slog.String("workflow", a.workflow),
			slog.String("from", a.from), slog.String("to", a.to.shape.Version), slog.Int("runs", n))
	}
	return len(res.Moved)
}
