package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/cronslot"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Schedules declared in code: a workflow's definition says which schedules
// start it, and every engine that registers it makes the store agree when
// it starts. See docs/semantics.md ("Declared schedules").

// declaredSchedule is a schedule a workflow declares (DeclareSchedule).
type declaredSchedule struct {
	tenant, name string
	input        any
	cron, zone   string
	paused       bool
}

// DeclareSchedule declares, as part of w's definition, the schedule named
// name for tenant that starts a run of w with input in at every slot of
// the cron expression (read in opts.TimeZone, UTC by default; paused when
// opts.Paused). Declare a workflow's schedules where it is defined, before
// it is registered or run, like its steps.
//
// An engine makes the store hold what its workflows declare every time it
// starts (Engine.Start; for a workflow registered after Start, when it is
// registered): a declared schedule that does not exist is created, one
// whose declaration changed is updated (a changed expression or time zone
// takes its next slot from then on; the last slot fired is kept, so no
// slot fires twice), one declared as before is not written at all, and a
// schedule the workflow declared before but no longer does is deleted.
// Schedules created through the API (Engine.CreateSchedule, the CLI) are
// never updated or deleted by declarations; declaring one of their names
// fails Start with ErrScheduleExists. Many engines starting at once with
// the same declarations converge on one schedule each, and a slot fires
// once whatever the number of engines.
//
// A schedule is paused as declared whenever its declaration changes; an
// operator's pause or resume (Engine.PauseSchedule) holds until then.
//
// Mistakes are reported by Engine.Register as *DefinitionError values
// matching ErrInvalidSchedule and naming the schedule: an invalid tenant,
// name, expression or time zone, an input that the engine's Codec cannot
// encode or decode back, or a tenant and name declared twice (by this
// workflow or another registered on the engine). A schedule declared after
// the workflow was registered or run is reported as ErrWorkflowFrozen.
func (w *Workflow[I]) DeclareSchedule(tenant, name string, in I, cron string, opts ScheduleOptions) {
	w.defn().declare(&declaredSchedule{tenant: tenant, name: name, input: in, cron: cron, zone: opts.TimeZone, paused: opts.Paused})
}

// scheduleError reports a mistake in the declaration of schedule s of d.
func (d *workflowDef) scheduleError(s *declaredSchedule, err error, detail string) *DefinitionError {
	return &DefinitionError{Workflow: d.name, Err: err,
		Detail: fmt.Sprintf("schedule %s of tenant %s: %s", dag.Quote(s.name), dag.Quote(s.tenant), detail)}
}

// declare adds a declared schedule, or records why it cannot be.
func (d *workflowDef) declare(s *declaredSchedule) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fail := func(err error, detail string) { d.errs = append(d.errs, d.scheduleError(s, err, detail)) }
	if d.frozen {
		fail(ErrWorkflowFrozen, "declared after the workflow was registered or run")
		return
	}
	switch {
	case !dag.ValidTenant(s.tenant):
		fail(durabletype.ErrInvalidSchedule, fmt.Sprintf("invalid tenant: use 1 to %d bytes of UTF-8 without control characters", dag.MaxTenantLen))
		return
	case !dag.ValidTenant(s.name):
		fail(durabletype.ErrInvalidSchedule, fmt.Sprintf("invalid name: use 1 to %d bytes of UTF-8 without control characters", dag.MaxTenantLen))
		return
	case slices.ContainsFunc(d.schedules, func(o *declaredSchedule) bool { return o.tenant == s.tenant && o.name == s.name }):
		fail(durabletype.ErrInvalidSchedule, "declared twice")
		return
	}
	if _, err := cronslot.Parse(s.cron, s.zone, time.Now()); err != nil {
		fail(durabletype.ErrInvalidSchedule, err.Error())
		return
	}
	d.schedules = append(d.schedules, s)
}

// declarations returns the schedules defs declare, ready for the store
// (inputs encoded with the engine's Codec, shapes recorded), or the
// definition errors of those that cannot be: an input that does not
// encode or decode back, a tenant and name declared by two workflows.
func (e *Engine) declarations(defs []*workflowDef) ([]store.DeclaredSchedule, error) {
	var out []store.DeclaredSchedule
	var errs []error
	owner := map[durabletype.ScheduleKey]string{}
	for _, d := range defs {
		shape, err := e.shapeOf(d)
		if err != nil {
			return nil, err
		}
		for _, s := range d.schedules {
			k := durabletype.ScheduleKey{Tenant: s.tenant, Name: s.name}
			if wf, ok := owner[k]; ok {
				errs = append(errs, d.scheduleError(s, durabletype.ErrInvalidSchedule, "declared by workflow "+dag.Quote(wf)+" too"))
				continue
			}
			owner[k] = d.name
			b, err := e.cfg.Codec.Marshal(s.input)
			if err == nil {
				err = e.checkInput("the input", b)
			}
			if err == nil {
				_, err = d.decodeInput(e.cfg.Codec, b)
			}
			if err != nil {
				errs = append(errs, d.scheduleError(s, durabletype.ErrInvalidSchedule, "input does not encode and decode back: "+err.Error()))
				continue
			}
			id, err := uuid.NewV7()
			if err != nil {
				return nil, fmt.Errorf("durable: schedule id: %w", err)
			}
			out = append(out, store.DeclaredSchedule{ID: id, Tenant: s.tenant, Name: s.name, Workflow: d.name,
				Input: b, Cron: s.cron, TimeZone: s.zone, Shape: shape, Paused: s.paused})
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// checkDeclared checks the schedules declared by the workflows of reg, the
// registry a registration makes (Register, with e.mu held).
func (e *Engine) checkDeclared(reg *registry) error {
	_, err := e.declarations(reg.declaring())
	return err
}

// declaring returns the definitions whose declared schedules an engine
// holds the store to: of each workflow, its newest version (the one its
// schedules start), in name order.
func (r *registry) declaring() []*workflowDef {
	defs := make([]*workflowDef, 0, len(r.names))
	for _, name := range r.names {
		defs = append(defs, r.newest(name).d)
	}
	return defs
}

// applyDeclared makes the store hold the schedules declared by defs (nil:
// every workflow registered on e), and delete those they declared before
// and no longer do.
func (e *Engine) applyDeclared(ctx context.Context, defs []*workflowDef) error {
	if defs == nil {
		e.mu.Lock()
		defs = e.reg.declaring()
		e.mu.Unlock()
	}
	if len(defs) == 0 {
		return nil
	}
	slices.SortFunc(defs, func(a, b *workflowDef) int { return strings.Compare(a.name, b.name) })
	decls, err := e.declarations(defs)
	if err != nil {
		return err
	}
	sd, ok := e.store.(store.ScheduleDeclarer)
	if !ok {
		if len(decls) == 0 {
			return nil // such a store holds no declared schedule either
		}
		return fmt.Errorf("%w: the workflows declare schedules", ErrSchedulesUnsupported)
	}
	names := make([]string, len(defs))
	for i, d := range defs {
		names[i] = d.name
	}
	res, err := sd.DeclareSchedules(ctx, &store.DeclareSchedulesParams{Now: e.now(), Workflows: names, Schedules: decls})
	if err != nil {
		return fmt.Errorf("durable: applying declared schedules: %w", err)
	}
	for _, c := range []struct {
		what string
		keys []durabletype.ScheduleKey
	}{{"created", res.Created}, {"updated", res.Updated}, {"deleted", res.Deleted}} {
		for _, k := range c.keys {
			e.log.Info("durable: declared schedule "+c.what, slog.String("tenant", k.Tenant), slog.String("schedule", k.Name))
		}
	}
	if len(res.Created)+len(res.Updated) > 0 {
		e.wakeSchedules()
	}
	return nil
}

// declareLate applies, in the background, the declarations of workflows
// registered after Start; e.mu is held (Register).
func (e *Engine) declareLate(rt *runtime, add []*workflowDef) {
	rt.aux.Go(func() {
		ctx, cancel := context.WithTimeout(rt.ctx, lateDeclareTimeout)
		defer cancel()
		if err := e.applyDeclared(ctx, add); err != nil && rt.ctx.Err() == nil {
			e.log.Error("durable: applying the declared schedules of workflows registered after Start", slog.Any("error", err))
		}
	})
}

// lateDeclareTimeout bounds declareLate.
const lateDeclareTimeout = 30 * time.Second
