package durable

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Operating runs: finding, cancelling, replaying, counting and pruning
// them. Every method exists on the Engine, for all tenants, and on the
// *TenantRuns that Engine.Tenant returns, scoped to one tenant.

// Errors of operating runs.
var (
	// ErrRunCancelled is matched by the *RunError of a cancelled run, and is
	// the cause of the context of a step whose run was cancelled or passed
	// its deadline (WithDeadline).
	ErrRunCancelled = errors.New("durable: run cancelled")
	// ErrRunSettled: a run that has settled cannot be cancelled.
	ErrRunSettled = durabletype.ErrRunSettled
	// ErrRunNotSettled: a run that has not settled cannot be replayed (it
	// still runs, or a concurrent replay won).
	ErrRunNotSettled = durabletype.ErrRunNotSettled
	// ErrNothingToReplay: a completed run is replayed only from a step.
	ErrNothingToReplay = durabletype.ErrNothingToReplay
	// ErrStepNotFound: a replay names a step the run does not have.
	ErrStepNotFound = durabletype.ErrStepNotFound
	// ErrInvalidCursor: a list cursor that this engine did not hand out for
	// the same filter and scope.
	ErrInvalidCursor = errors.New("durable: invalid cursor")
	// ErrInvalidFilter: a filter with an unknown status, a time outside
	// years 1-9999, a time range that ends before it begins, or a limit or
	// window out of range, an InputContains that is not JSON or is too
	// large, or a workflow, version, tenant or idempotency key that breaks
	// the rule of its kind (an *InvalidValueError, which matches this
	// too). A valid one that matches no run is not an error: the page is
	// empty.
	ErrInvalidFilter = errors.New("durable: invalid filter")
)

// RunFilter selects runs; zero fields do not filter.
type RunFilter struct {
	// Statuses keeps runs in one of these statuses.
	Statuses []durabletype.RunStatus
	// Workflow keeps runs of one workflow.
	Workflow string
	// Version keeps runs pinned to one version of their workflow.
	Version string
	// Tenant keeps runs of one tenant. Through a *TenantRuns it must be
	// empty or that tenant.
	Tenant string
	// CreatedAfter and CreatedBefore bound when runs were started: at or
	// after the first, before the second.
	CreatedAfter, CreatedBefore time.Time
	// FinishedAfter and FinishedBefore bound when runs settled; either keeps
	// only settled runs.
	FinishedAfter, FinishedBefore time.Time
	// Parent keeps the child runs of one run (see Child).
	Parent uuid.UUID

	// TopLevel keeps the runs no parent run started: it leaves out child
	// runs (see Child). With Parent set, nothing matches.
	TopLevel bool
	// IdempotencyKey keeps the runs started with this idempotency key
	// (WithIdempotencyKey), compared exactly; with the workflow and tenant
	// it names at most one run. Indexed in pgstore: a lookup by key is fast
	// however many runs are kept.
	IdempotencyKey string
	// InputContains, when set, keeps the runs whose input (as the JSON
	// codec encodes it) contains this JSON value, as PostgreSQL's jsonb
	// @> operator says: {"customer":"c-42"} keeps the runs whose input is
	// an object with "customer" equal to "c-42", whatever its other keys.
	// A run whose input is not JSON never matches. At most 16 KiB of
	// valid JSON, else ErrInvalidFilter. Not indexed: it is checked on the
	// runs the other fields select, newest first, until the page is full,
	// so pair it with a workflow, tenant or time range on large stores.
	InputContains json.RawMessage
}

// ListOptions are the options of ListRuns.
type ListOptions struct {
	RunFilter
	// Limit is the most runs on a page. Defaults to 50; at most 1,000.
	Limit int
	// Cursor continues a listing: the Next of the previous page, with the
	// same filter.
	Cursor string
}

// RunSummary is a run as a list shows it: its ID, workflow, tenant, status,
// creation and settlement times, and the step and error that failed it (or
// the reason it was cancelled).
//
// Deprecated: use durabletype.RunSummary; this alias goes in the next
// release.
type RunSummary = durabletype.RunSummary

// RunPage is one page of a listing, newest runs first.
type RunPage struct {
	Runs []durabletype.RunSummary
	// Next continues the listing (ListOptions.Cursor); empty on the last
	// page.
	Next string
}

// ReplayOptions are the options of Replay and ReplayRuns.
type ReplayOptions struct {
	// FromStep, when set, runs that step and all its descendants again even
	// if they completed.
	FromStep string
	// IncludeCancelled makes ReplayRuns, when its filter names no status,
	// replay the CANCELLED runs too: by default it replays only the
	// unsuccessful runs an operator did not cancel (FAILED), so that a
	// replay of "everything that failed" does not revive what someone
	// stopped on purpose. A filter that names statuses is applied as is.
	IncludeCancelled bool
}

// BulkResult reports what CancelRuns or ReplayRuns did.
type BulkResult struct {
	// Done counts the runs cancelled (or replayed).
	Done int
	// Skipped counts the runs matching the filter that the action did not
	// apply to: settled runs for a cancel; runs still running, or completed
	// runs without a step to replay from, for a replay.
	Skipped int
}

// StatsOptions are the options of Stats.
type StatsOptions struct {
	// Window is how far back settled runs are counted, by the minute they
	// settled in. Defaults to one hour. Counts are kept as long as the
	// runs (Config.Retention).
	Window time.Duration
}

// Stats counts tasks and runs by workflow and tenant: the tasks ready,
// waiting (retry backoffs, sleeps, events, signals, child runs, map items)
// and running with the age of the oldest ready one, the runs in flight by
// status, and the runs that settled within the window by status. Its cost
// does not grow with the number of settled runs.
//
// Deprecated: use durabletype.Stats; this alias goes in the next release.
type Stats = durabletype.Stats

// TenantRuns is the operator API scoped to one tenant: every read and action
// through it ignores the runs of other tenants, reporting them
// ErrRunNotFound, so that a SaaS can expose it to its own customers.
type TenantRuns struct {
	e      *Engine
	tenant string
	scoped bool // false: every tenant (the Engine's own methods)
}

// Tenant returns the operator API scoped to tenant. A tenant ID that could
// not exist (see ErrInvalidTenant), the empty one included, finds nothing
// and changes nothing: an empty tenant never widens the scope to all.
func (e *Engine) Tenant(tenant string) *TenantRuns {
	return &TenantRuns{e: e, tenant: tenant, scoped: true}
}

func (e *Engine) all() *TenantRuns { return &TenantRuns{e: e} }

// empty reports whether the scope can hold no run: its tenant could not
// exist.
func (v *TenantRuns) empty() bool { return v.scoped && !dag.ValidTenant(v.tenant) }

// scope names the scope for cursors: a cursor is refused in another scope.
func (v *TenantRuns) scope() string {
	if !v.scoped {
		return "*"
	}
	return "tenant:" + v.tenant
}

// ListRuns returns a page of the runs matching the filter, newest first.
// A workflow, version or tenant in the filter that breaks the rule of its
// kind is refused (ErrInvalidFilter, with an *InvalidValueError naming
// it); a valid one that matches nothing gives an empty page.
// Pages are cut by keyset (the creation time and ID of the last run), so a
// listing neither repeats nor skips runs while they settle or new ones
// start.
func (e *Engine) ListRuns(ctx context.Context, opts ListOptions) (*RunPage, error) {
	return e.all().ListRuns(ctx, opts)
}

// Cancel cancels a run that has not settled: it becomes CANCELLED, steps
// waiting (queued, sleeping, backing off) are cancelled and never run, and
// running steps have their contexts cancelled (cause ErrRunCancelled) at
// once where the store notifies, at their next heartbeat at the latest;
// their late outcomes are not recorded. The on-failure handler does not run
// for a cancelled run. A settled run is refused with ErrRunSettled. The
// reason may be empty; one that is not at most 1,000 bytes of UTF-8
// without control characters (but tab and newline) is refused with an
// *InvalidValueError.
func (e *Engine) Cancel(ctx context.Context, id uuid.UUID, reason string) error {
	return e.all().Cancel(ctx, id, reason)
}

// CancelRuns cancels every run matching the filter that has not settled
// (RUNNING runs when the filter names no status: CancelFilter), in batches
// of 100, each one transaction.
func (e *Engine) CancelRuns(ctx context.Context, f RunFilter, reason string) (*BulkResult, error) {
	return e.all().CancelRuns(ctx, f, reason)
}

// Replay makes a FAILED or CANCELLED run run again: its failed and cancelled
// steps and everything downstream of them start afresh (new attempt
// counts), while completed steps keep their outputs and do not run again.
// With FromStep, that step and its descendants run again even if they
// completed, which also replays a COMPLETED run. The event log shows a
// REPLAYED event for each step run again; the on-failure handler can run
// again after a new failure. A FromStep that is not a valid step name is
// refused with an *InvalidValueError (matching ErrInvalidName), one the
// run does not have with ErrStepNotFound.
func (e *Engine) Replay(ctx context.Context, id uuid.UUID, opts ReplayOptions) error {
	return e.all().Replay(ctx, id, opts)
}

// ReplayRuns replays every run matching the filter (when the filter names
// no status, the FAILED runs, and the CANCELLED ones with
// opts.IncludeCancelled: ReplayFilter), in batches of 100, each one
// transaction.
func (e *Engine) ReplayRuns(ctx context.Context, f RunFilter, opts ReplayOptions) (*BulkResult, error) {
	return e.all().ReplayRuns(ctx, f, opts)
}

// Stats counts the tasks and runs of every workflow and tenant.
func (e *Engine) Stats(ctx context.Context, opts StatsOptions) (*durabletype.Stats, error) {
	return e.all().Stats(ctx, opts)
}

// Prune deletes the runs that settled more than olderThan ago, with their
// tasks and events, in batches of pruneBatch, each a short transaction. It
// reports how many it deleted. Runs not settled are never deleted.
func (e *Engine) Prune(ctx context.Context, olderThan time.Duration) (int, error) {
	return e.prune(ctx, olderThan, false)
}

// retain is the leader's retention: Prune, letting the store keep runs a
// little longer to delete whole periods at once (store.PruneRunsParams.Lazy).
func (e *Engine) retain(ctx context.Context, olderThan time.Duration) (int, error) {
	return e.prune(ctx, olderThan, true)
}

func (e *Engine) prune(ctx context.Context, olderThan time.Duration, lazy bool) (int, error) {
	if olderThan < 0 {
		return 0, fmt.Errorf("%w: negative age %s", ErrInvalidFilter, olderThan)
	}
	total := 0
	for {
		res, err := e.store.PruneRuns(ctx, &store.PruneRunsParams{Now: e.now(), OlderThan: olderThan, Limit: pruneBatch, Lazy: lazy})
		if err != nil {
			return total, fmt.Errorf("durable: prune: %w", err)
		}
		total += res.Deleted
		if res.Deleted < pruneBatch {
			return total, nil
		}
	}
}

// pruneBatch is the most runs one prune transaction deletes.
const pruneBatch = 500

// bulkBatch is the most runs one bulk cancel or replay transaction changes.
const bulkBatch = 100

// ListRuns is Engine.ListRuns within the tenant.
func (v *TenantRuns) ListRuns(ctx context.Context, opts ListOptions) (*RunPage, error) {
	f, err := v.filter(opts.RunFilter)
	if err != nil {
		return nil, err
	}
	limit := opts.Limit
	switch {
	case limit == 0:
		limit = 50
	case limit < 0 || limit > 1000:
		return nil, fmt.Errorf("%w: limit %d outside 1-1000", ErrInvalidFilter, limit)
	}
	if f.Impossible {
		return &RunPage{}, nil
	}
	fp := fingerprint(v.scope(), opts.RunFilter)
	p := &store.ListRunsParams{Filter: f.RunFilter, Limit: limit}
	if opts.Cursor != "" {
		k, err := decodeCursor(opts.Cursor, fp)
		if err != nil {
			return nil, err
		}
		p.After = k
	}
	res, err := v.e.store.ListRuns(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("durable: list runs: %w", err)
	}
	page := &RunPage{Runs: res.Runs}
	if res.More && len(res.Runs) > 0 {
		last := res.Runs[len(res.Runs)-1]
		page.Next = encodeCursor(store.RunKey{CreatedAt: last.CreatedAt, ID: last.ID}, fp)
	}
	return page, nil
}

// Get is Engine.Get within the tenant.
func (v *TenantRuns) Get(ctx context.Context, id uuid.UUID) (*RunResult, error) {
	run, err := v.getRun(ctx, id)
	if err != nil {
		return nil, err
	}
	return v.e.result(ctx, run)
}

// Events is Engine.Events within the tenant.
func (v *TenantRuns) Events(ctx context.Context, id uuid.UUID) ([]durabletype.Event, error) {
	if _, err := v.getRun(ctx, id); err != nil {
		return nil, err
	}
	return v.e.Events(ctx, id)
}

// Wait is Engine.Wait within the tenant.
func (v *TenantRuns) Wait(ctx context.Context, id uuid.UUID) (*RunResult, error) {
	if _, err := v.getRun(ctx, id); err != nil {
		return nil, err
	}
	return v.e.Wait(ctx, id)
}

// otherTenant reports whether the run a GetRun read (run, or err: the
// *durabletype.ShapeError of a run this engine cannot read) is not
// tenant's.
func otherTenant(run *store.Run, err error, tenant string) bool {
	var se *durabletype.ShapeError
	switch {
	case err == nil:
		return run.Tenant != tenant
	case errors.As(err, &se):
		return se.Tenant != tenant
	}
	return false
}

// getRun reads a run, not found when it is another tenant's.
func (v *TenantRuns) getRun(ctx context.Context, id uuid.UUID) (*store.Run, error) {
	run, err := v.e.store.GetRun(ctx, id)
	if v.scoped && otherTenant(run, err, v.tenant) {
		err = durabletype.ErrRunNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("durable: run %s: %w", id, err)
	}
	return run, nil
}

// Cancel is Engine.Cancel within the tenant.
func (v *TenantRuns) Cancel(ctx context.Context, id uuid.UUID, reason string) error {
	if err := dag.ReasonRule.Check("reason", reason); err != nil {
		return err
	}
	if v.empty() {
		return fmt.Errorf("durable: cancel run %s: %w", id, durabletype.ErrRunNotFound)
	}
	res, err := v.act(ctx, &store.ActOnRunsParams{Action: durabletype.ActionCancel, IDs: []uuid.UUID{id}, Reason: reason})
	if err != nil {
		return fmt.Errorf("durable: cancel run %s: %w", id, err)
	}
	if res[0].Err != nil {
		return fmt.Errorf("durable: cancel run %s: %w", id, res[0].Err)
	}
	return nil
}

// CancelRuns is Engine.CancelRuns within the tenant.
func (v *TenantRuns) CancelRuns(ctx context.Context, f RunFilter, reason string) (*BulkResult, error) {
	if err := dag.ReasonRule.Check("reason", reason); err != nil {
		return nil, err
	}
	return v.bulk(ctx, CancelFilter(f), &store.ActOnRunsParams{Action: durabletype.ActionCancel, Reason: reason})
}

// CancelFilter is the filter CancelRuns applies to select runs: f, with
// every in-flight status (durabletype.RunStatus.InFlight) when f names
// none. Listing it (ListRuns) shows what CancelRuns would act on: a dry
// run. The runs listed whose status does not allow a cancel
// (durabletype.RunStatus.Allows) would be skipped.
func CancelFilter(f RunFilter) RunFilter {
	if len(f.Statuses) == 0 {
		f.Statuses = durabletype.RunStatusesWhere(durabletype.RunStatus.InFlight)
	}
	return f
}

// ReplayFilter is the filter ReplayRuns applies to select runs: f, with
// the unsuccessful statuses (durabletype.RunStatus.Unsuccessful) when f
// names none, CANCELLED left out unless opts.IncludeCancelled. Listing it
// (ListRuns) shows what ReplayRuns would act on: a dry run. Runs listed
// whose status does not allow a replay, or a completed run without
// opts.FromStep, would be skipped.
func ReplayFilter(f RunFilter, opts ReplayOptions) RunFilter {
	if len(f.Statuses) == 0 {
		f.Statuses = durabletype.RunStatusesWhere(func(s durabletype.RunStatus) bool {
			return s.Unsuccessful() && (opts.IncludeCancelled || s != durabletype.RunCancelled)
		})
	}
	return f
}

// Replay is Engine.Replay within the tenant.
func (v *TenantRuns) Replay(ctx context.Context, id uuid.UUID, opts ReplayOptions) error {
	if err := checkReplay(opts); err != nil {
		return err
	}
	if v.empty() {
		return fmt.Errorf("durable: replay run %s: %w", id, durabletype.ErrRunNotFound)
	}
	res, err := v.act(ctx, &store.ActOnRunsParams{Action: durabletype.ActionReplay, IDs: []uuid.UUID{id}, FromStep: opts.FromStep})
	if err != nil {
		return fmt.Errorf("durable: replay run %s: %w", id, err)
	}
	if res[0].Err != nil {
		return fmt.Errorf("durable: replay run %s: %w", id, res[0].Err)
	}
	v.e.wakeClaims()
	return nil
}

// ReplayRuns is Engine.ReplayRuns within the tenant.
func (v *TenantRuns) ReplayRuns(ctx context.Context, f RunFilter, opts ReplayOptions) (*BulkResult, error) {
	if err := checkReplay(opts); err != nil {
		return nil, err
	}
	res, err := v.bulk(ctx, ReplayFilter(f, opts), &store.ActOnRunsParams{Action: durabletype.ActionReplay, FromStep: opts.FromStep})
	v.e.wakeClaims()
	return res, err
}

// act applies the action of p (its IDs and inputs set) within the scope,
// at the engine's time, and counts the runs it settled.
func (v *TenantRuns) act(ctx context.Context, p *store.ActOnRunsParams) ([]store.RunActionResult, error) {
	p.Now, p.Tenant = v.e.now(), v.tenant
	res, err := v.e.store.ActOnRuns(ctx, p)
	if err == nil && len(res) > 0 {
		v.e.countSettled(ctx, res[0].Settled)
	}
	return res, err
}

// bulk applies the action of p to every run matching f, a page at a time
// (bulkBatch runs, one call of the store each). Pages follow the keyset of
// the listing, which the action does not move, so every matching run is
// met once.
func (v *TenantRuns) bulk(ctx context.Context, f RunFilter, p *store.ActOnRunsParams) (*BulkResult, error) {
	out := &BulkResult{}
	opts := ListOptions{RunFilter: f, Limit: bulkBatch}
	for {
		page, err := v.ListRuns(ctx, opts)
		if err != nil {
			return out, err
		}
		if len(page.Runs) > 0 {
			ids := make([]uuid.UUID, len(page.Runs))
			for i, r := range page.Runs {
				ids[i] = r.ID
			}
			p.IDs = ids
			res, err := v.act(ctx, p)
			if err != nil {
				return out, fmt.Errorf("durable: %w", err)
			}
			for _, r := range res {
				switch {
				case r.Err == nil:
					out.Done++
				case errors.Is(r.Err, durabletype.ErrRunNotFound):
					// pruned meanwhile
				default:
					out.Skipped++
				}
			}
		}
		if page.Next == "" {
			return out, nil
		}
		opts.Cursor = page.Next
	}
}

// Stats is Engine.Stats within the tenant.
func (v *TenantRuns) Stats(ctx context.Context, opts StatsOptions) (*durabletype.Stats, error) {
	if opts.Window == 0 {
		opts.Window = time.Hour
	}
	if opts.Window < 0 {
		return nil, fmt.Errorf("%w: negative window %s", ErrInvalidFilter, opts.Window)
	}
	if v.empty() {
		return &durabletype.Stats{}, nil
	}
	st, err := v.e.store.Stats(ctx, &store.StatsParams{Now: v.e.now(), Tenant: v.tenant, Window: opts.Window})
	if err != nil {
		return nil, fmt.Errorf("durable: stats: %w", err)
	}
	return st, nil
}

// scopedFilter is a filter checked and scoped; Impossible marks one that
// can match nothing (another tenant's, or a scope whose tenant cannot
// exist).
type scopedFilter struct {
	store.RunFilter
	Impossible bool
}

// filter checks f and applies the scope.
func (v *TenantRuns) filter(f RunFilter) (scopedFilter, error) {
	out := scopedFilter{RunFilter: store.RunFilter{
		Tenant: f.Tenant, Workflow: f.Workflow, Version: f.Version, Statuses: slices.Clone(f.Statuses),
		CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore,
		FinishedAfter: f.FinishedAfter, FinishedBefore: f.FinishedBefore, Parent: f.Parent,
		TopLevel:       f.TopLevel,
		IdempotencyKey: f.IdempotencyKey, InputContains: slices.Clone([]byte(f.InputContains)),
	}}
	for _, st := range f.Statuses {
		if !slices.Contains(durabletype.RunStatuses, st) {
			return out, fmt.Errorf("%w: status %s", ErrInvalidFilter, dag.Quote(string(st)))
		}
	}
	for _, t := range []time.Time{f.CreatedAfter, f.CreatedBefore, f.FinishedAfter, f.FinishedBefore} {
		if !t.IsZero() && !dag.ValidTime(t) {
			return out, fmt.Errorf("%w: time %s outside years 1-9999", ErrInvalidFilter, t.Format(time.RFC3339))
		}
	}
	if (!f.CreatedAfter.IsZero() && !f.CreatedBefore.IsZero() && f.CreatedBefore.Before(f.CreatedAfter)) ||
		(!f.FinishedAfter.IsZero() && !f.FinishedBefore.IsZero() && f.FinishedBefore.Before(f.FinishedAfter)) {
		return out, fmt.Errorf("%w: a time range that ends before it begins", ErrInvalidFilter)
	}
	if err := checkFilterNames(f); err != nil {
		return out, err
	}
	if len(f.InputContains) > 0 {
		if err := dag.CheckJSONFilter(f.InputContains); err != nil {
			return out, fmt.Errorf("%w: input contains: %w", ErrInvalidFilter, err)
		}
	}
	if v.scoped {
		if f.Tenant != "" && f.Tenant != v.tenant {
			out.Impossible = true // another tenant's runs are not there to see
		}
		out.Tenant = v.tenant
		out.Impossible = out.Impossible || v.empty()
	}
	return out, nil
}

// A cursor is the keyset of the last run of a page, with a fingerprint of
// the scope and filter it was made for, so that it is refused with another
// filter or in another tenant's scope rather than misread.
type cursor struct {
	CreatedAt int64  `json:"c"` // Unix microseconds
	ID        string `json:"i"`
	Filter    string `json:"f"`
}

func fingerprint(scope string, f RunFilter) string {
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	js, _ := json.Marshal(f) // plain data: cannot fail
	h.Write(js)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func encodeCursor(k store.RunKey, fp string) string {
	js, _ := json.Marshal(cursor{CreatedAt: k.CreatedAt.UnixMicro(), ID: k.ID.String(), Filter: fp})
	return base64.RawURLEncoding.EncodeToString(js)
}

func decodeCursor(s, fp string) (*store.RunKey, error) {
	if len(s) > 200 {
		return nil, fmt.Errorf("%w: too long", ErrInvalidCursor)
	}
	js, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCursor, err)
	}
	var c cursor
	if err := json.Unmarshal(js, &c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCursor, err)
	}
	id, err := uuid.Parse(c.ID)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCursor, err)
	}
	if c.Filter != fp {
		return nil, fmt.Errorf("%w: made for another filter or scope", ErrInvalidCursor)
	}
	at := time.UnixMicro(c.CreatedAt).UTC()
	if !dag.ValidTime(at) {
		return nil, fmt.Errorf("%w: time outside years 1-9999", ErrInvalidCursor)
	}
	return &store.RunKey{CreatedAt: at, ID: id}, nil
}
