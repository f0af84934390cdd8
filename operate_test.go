package durable_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// Operating runs through the engine: cancel, replay, list, stats and
// retention, on both stores.

// TestCancelStopsRunningSteps: a cancelled run's running step learns it at
// once (a notification) with a cause it can test, waiting steps never run,
// the on-failure handler does not run, the late outcome is not recorded,
// and Run returns an error matching ErrRunCancelled.
func TestCancelStopsRunningSteps(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		started := make(chan uuid.UUID, 1)
		cause := make(chan error, 1)
		var handled, after atomic.Int32
		wf := durable.NewWorkflow[int]("cancel-me")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
			started <- ctx.RunID()
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return 1, nil // a late success: not recorded
		})
		durable.Step(wf, "b", func(ctx durable.Context, in int) (int, error) {
			after.Add(1)
			return 2, nil
		}, durable.After(a))
		wf.OnFailure(func(ctx durable.Context, in int, f durable.Failure) error {
			handled.Add(1)
			return nil
		})
		e := h.start(durable.Config{}, wf)
		other := h.client()
		ctx := h.ctx(time.Minute)
		done := make(chan error, 1)
		var res *durable.RunResult
		go func() {
			var err error
			res, err = wf.Run(ctx, e, "t", 1)
			done <- err
		}()
		id := <-started
		begin := time.Now()
		require.NoError(t, other.Cancel(ctx, id, "no longer needed"))
		require.ErrorIs(t, <-cause, durable.ErrRunCancelled)
		if h.virtual {
			require.Zero(t, time.Since(begin), "by notification, not at the next heartbeat")
		}
		err := <-done
		require.ErrorIs(t, err, durable.ErrRunCancelled)
		require.NotErrorIs(t, err, durable.ErrRunFailed)
		require.Contains(t, err.Error(), "was cancelled: no longer needed")
		require.Equal(t, durabletype.RunCancelled, res.Status)
		require.True(t, res.Done())
		h.eventually(time.Minute, func() bool {
			got, err := e.Get(ctx, id)
			require.NoError(t, err)
			s, _ := got.Step("a")
			return s.State == durabletype.TaskCancelled
		}, "step a stays cancelled")
		got, err := e.Get(ctx, id)
		require.NoError(t, err)
		for _, s := range got.Steps {
			require.Equal(t, durabletype.TaskCancelled, s.State, s.Name)
			require.Nil(t, s.Output, s.Name)
		}
		require.Len(t, got.Steps, 2, "no on-failure handler for a cancelled run")
		require.Zero(t, handled.Load())
		require.Zero(t, after.Load())
		err = e.Cancel(ctx, id, "again")
		require.ErrorIs(t, err, durabletype.ErrRunSettled)
		require.ErrorIs(t, e.Cancel(ctx, uuid.New(), ""), durabletype.ErrRunNotFound)
	})
}

// TestCancelReachesStepsWithoutNotifications: an engine that hears no
// notifications learns of the cancel at its next heartbeat.
func TestCancelReachesStepsWithoutNotifications(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		started := make(chan uuid.UUID, 1)
		cause := make(chan error, 1)
		wf := durable.NewWorkflow[int]("cancel-deaf")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
			started <- ctx.RunID()
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return 0, ctx.Err()
		})
		deaf := &deafStore{hookStore{Store: h.store}}
		e := h.startOn(deaf, durable.Config{}, wf)
		ctx := h.ctx(time.Minute)
		_, err := wf.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		id := <-started
		require.NoError(t, h.client().Cancel(ctx, id, ""))
		require.ErrorIs(t, <-cause, durable.ErrRunCancelled)
	})
}

// deafStore passes on no cancel notification.
type deafStore struct{ hookStore }

func (s *deafStore) Listen(ctx context.Context, deliver func(store.Notification)) error {
	return s.hookStore.Listen(ctx, func(n store.Notification) {
		if n.Topic != store.TopicCancel {
			deliver(n)
		}
	})
}

// TestReplayRunsWhatFailed: a replayed run runs its failed step and what
// follows again, while a completed step keeps its output and does not run
// again; from a step, that step runs again too; the on-failure handler runs
// once per failure.
func TestReplayRunsWhatFailed(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		var runs counter
		var broken atomic.Bool
		broken.Store(true)
		wf := durable.NewWorkflow[int]("replayable")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
			runs.inc("a")
			return in * 10, nil
		})
		b := durable.Step(wf, "b", func(ctx durable.Context, in int) (int, error) {
			runs.inc("b")
			if broken.Load() {
				return 0, durable.Terminal(errors.New("the bug"))
			}
			v, ok := a.Output(ctx)
			if !ok {
				return 0, errors.New("no a")
			}
			return v + 1, nil
		}, durable.After(a))
		c := durable.Step(wf, "c", func(ctx durable.Context, in int) (int, error) {
			runs.inc("c")
			v, _ := b.Output(ctx)
			return v + 1, nil
		}, durable.After(b))
		wf.OnFailure(func(ctx durable.Context, in int, f durable.Failure) error {
			runs.inc("handler")
			return nil
		})
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)
		res, err := wf.Run(ctx, e, "t", 4)
		require.ErrorIs(t, err, durable.ErrRunFailed)
		id := res.ID
		require.ErrorIs(t, e.Replay(ctx, id, durable.ReplayOptions{FromStep: "nope"}), durabletype.ErrStepNotFound)

		broken.Store(false) // the bug is fixed and deployed
		require.NoError(t, e.Replay(ctx, id, durable.ReplayOptions{}))
		res, err = e.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		out, err := c.Result(res)
		require.NoError(t, err)
		require.Equal(t, 42, out)
		require.Equal(t, map[string]int{"a": 1, "b": 2, "c": 1, "handler": 1}, runs.snapshot(),
			"a completed before and did not run again")
		require.Equal(t, []string{"QUEUED/0", "STARTED/1", "FAILED/1", "REPLAYED/1", "QUEUED/0", "STARTED/1", "COMPLETED/1"},
			stepEvents(t, e, id, "b"))
		require.ErrorIs(t, e.Replay(ctx, id, durable.ReplayOptions{}), durabletype.ErrNothingToReplay)

		require.NoError(t, e.Replay(ctx, id, durable.ReplayOptions{FromStep: "a"}))
		res, err = e.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status)
		require.Equal(t, map[string]int{"a": 2, "b": 3, "c": 2, "handler": 1}, runs.snapshot())
	})
}

// TestTenantScope: through a tenant's scope, another tenant's runs can be
// neither listed, read, waited for, cancelled nor replayed, and a cursor
// made in one scope or for one filter is refused in another.
func TestTenantScope(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		release := make(chan struct{})
		wf := durable.NewWorkflow[int]("scoped")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
			if in < 0 {
				<-release
			}
			return in, nil
		})
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)
		var mine, theirs []uuid.UUID
		for i := range 5 {
			id, err := wf.RunNoWait(ctx, e, "acme", i)
			require.NoError(t, err)
			mine = append(mine, id)
			id, err = wf.RunNoWait(ctx, e, "globex", -1-i)
			require.NoError(t, err)
			theirs = append(theirs, id)
		}
		defer close(release)
		acme := e.Tenant("acme")
		for _, id := range mine {
			_, err := acme.Wait(ctx, id)
			require.NoError(t, err)
		}
		var listed []uuid.UUID
		page, err := acme.ListRuns(ctx, durable.ListOptions{Limit: 2})
		require.NoError(t, err)
		for {
			for _, r := range page.Runs {
				require.Equal(t, "acme", r.Tenant)
				listed = append(listed, r.ID)
			}
			if page.Next == "" {
				break
			}
			_, err := e.Tenant("globex").ListRuns(ctx, durable.ListOptions{Limit: 2, Cursor: page.Next})
			require.ErrorIs(t, err, durable.ErrInvalidCursor, "a cursor of acme's scope in globex's")
			_, err = acme.ListRuns(ctx, durable.ListOptions{Limit: 2, Cursor: page.Next, RunFilter: durable.RunFilter{Workflow: "scoped"}})
			require.ErrorIs(t, err, durable.ErrInvalidCursor, "a cursor of another filter")
			page, err = acme.ListRuns(ctx, durable.ListOptions{Limit: 2, Cursor: page.Next})
			require.NoError(t, err)
		}
		require.ElementsMatch(t, mine, listed)
		page, err = acme.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Tenant: "globex"}})
		require.NoError(t, err)
		require.Empty(t, page.Runs, "asking for another tenant's runs in acme's scope finds none")

		victim := theirs[0]
		_, err = acme.Get(ctx, victim)
		require.ErrorIs(t, err, durabletype.ErrRunNotFound)
		_, err = acme.Events(ctx, victim)
		require.ErrorIs(t, err, durabletype.ErrRunNotFound)
		_, err = acme.Wait(ctx, victim)
		require.ErrorIs(t, err, durabletype.ErrRunNotFound)
		require.ErrorIs(t, acme.Cancel(ctx, victim, ""), durabletype.ErrRunNotFound)
		require.ErrorIs(t, acme.Replay(ctx, victim, durable.ReplayOptions{}), durabletype.ErrRunNotFound)
		bulk, err := acme.CancelRuns(ctx, durable.RunFilter{}, "all of them")
		require.NoError(t, err)
		require.Zero(t, bulk.Done, "acme's runs are done; globex's are out of its reach")
		got, err := e.Get(ctx, victim)
		require.NoError(t, err)
		require.Equal(t, durabletype.RunRunning, got.Status, "untouched")
		st, err := acme.Stats(ctx, durable.StatsOptions{})
		require.NoError(t, err)
		for _, q := range st.Queues {
			require.Equal(t, "acme", q.Tenant)
		}
		for _, c := range st.Runs {
			require.Equal(t, "acme", c.Tenant)
		}

		// A scope whose tenant could not exist, the empty one first (a
		// SaaS passing on a missing tenant header), holds nothing: it never
		// widens to every tenant.
		for _, bad := range []string{"", "\x00", strings.Repeat("x", 201)} {
			nobody := e.Tenant(bad)
			page, err := nobody.ListRuns(ctx, durable.ListOptions{})
			require.NoError(t, err)
			require.Empty(t, page.Runs, "%q", bad)
			_, err = nobody.Get(ctx, victim)
			require.ErrorIs(t, err, durabletype.ErrRunNotFound, "%q", bad)
			require.ErrorIs(t, nobody.Cancel(ctx, victim, ""), durabletype.ErrRunNotFound, "%q", bad)
			require.ErrorIs(t, nobody.Replay(ctx, mine[0], durable.ReplayOptions{FromStep: "a"}), durabletype.ErrRunNotFound, "%q", bad)
			bulk, err := nobody.CancelRuns(ctx, durable.RunFilter{}, "")
			require.NoError(t, err)
			require.Zero(t, bulk.Done+bulk.Skipped, "%q", bad)
			st, err := nobody.Stats(ctx, durable.StatsOptions{})
			require.NoError(t, err)
			require.Empty(t, st.Queues, "%q", bad)
			require.Empty(t, st.Runs, "%q", bad)
		}

		// Unscoped, the operator cancels globex's runs in bulk.
		bulk, err = e.CancelRuns(ctx, durable.RunFilter{Tenant: "globex"}, "maintenance")
		require.NoError(t, err)
		require.Equal(t, 5, bulk.Done)
		for _, id := range theirs {
			got, err := e.Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, durabletype.RunCancelled, got.Status)
		}
		// Replaying what failed does not revive what an operator
		// cancelled, unless asked.
		bulk, err = e.ReplayRuns(ctx, durable.RunFilter{Tenant: "globex"}, durable.ReplayOptions{})
		require.NoError(t, err)
		require.Zero(t, bulk.Done+bulk.Skipped, "cancelled runs are not replayed by default")
		page, err = e.ListRuns(ctx, durable.ListOptions{RunFilter: durable.ReplayFilter(durable.RunFilter{Tenant: "globex"},
			durable.ReplayOptions{IncludeCancelled: true})})
		require.NoError(t, err)
		require.Len(t, page.Runs, 5, "the dry run of the replay lists them")
		bulk, err = e.ReplayRuns(ctx, durable.RunFilter{Tenant: "globex"}, durable.ReplayOptions{IncludeCancelled: true})
		require.NoError(t, err)
		require.Equal(t, 5, bulk.Done)
	})
}

// TestListFilters: statuses, workflow, time ranges and bad filters.
func TestListFilters(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[int]("listed")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
			if in%3 == 0 {
				return 0, durable.Terminal(fmt.Errorf("%d is a multiple of 3", in))
			}
			return in, nil
		})
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)
		begin := time.Now()
		for i := range 9 {
			_, _ = wf.Run(ctx, e, "t", i)
		}
		failed, err := e.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Statuses: []durabletype.RunStatus{durabletype.RunFailed}}})
		require.NoError(t, err)
		require.Len(t, failed.Runs, 3)
		for _, r := range failed.Runs {
			require.Equal(t, "a", r.FailedStep)
			require.Contains(t, r.Error, "is a multiple of 3")
		}
		all, err := e.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Workflow: "listed", CreatedAfter: begin.Add(-time.Minute)}})
		require.NoError(t, err)
		require.Len(t, all.Runs, 9)
		for i := 1; i < len(all.Runs); i++ {
			require.False(t, all.Runs[i].CreatedAt.After(all.Runs[i-1].CreatedAt), "newest first")
		}
		_, err = e.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Statuses: []durabletype.RunStatus{"DONE"}}})
		require.ErrorIs(t, err, durable.ErrInvalidFilter)
		_, err = e.ListRuns(ctx, durable.ListOptions{Limit: 1001})
		require.ErrorIs(t, err, durable.ErrInvalidFilter)
		_, err = e.ListRuns(ctx, durable.ListOptions{Cursor: "not a cursor"})
		require.ErrorIs(t, err, durable.ErrInvalidCursor)
		_, err = e.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{CreatedAfter: begin, CreatedBefore: begin.Add(-time.Second)}})
		require.ErrorIs(t, err, durable.ErrInvalidFilter)
		// A name that breaks its rule is refused, naming the field; a
		// valid one that matches nothing gives an empty page.
		for _, f := range []durable.RunFilter{{Tenant: "nul\x00"}, {Workflow: "\xff"}, {Workflow: "a@b"}, {Version: "\x00"},
			{Tenant: strings.Repeat("t", 201)}} {
			_, err = e.ListRuns(ctx, durable.ListOptions{RunFilter: f})
			require.ErrorIs(t, err, durable.ErrInvalidFilter, "%+v", f)
			var ive *durable.InvalidValueError
			require.ErrorAs(t, err, &ive, "%+v", f)
			_, err = e.CancelRuns(ctx, f, "")
			require.ErrorIs(t, err, durable.ErrInvalidValue, "%+v", f)
		}
		for _, f := range []durable.RunFilter{{Tenant: "nobody"}, {Workflow: "nothing"}, {Version: "v0"}} {
			page, err := e.ListRuns(ctx, durable.ListOptions{RunFilter: f})
			require.NoError(t, err)
			require.Empty(t, page.Runs, "%+v matches no run", f)
		}

		// Times no store can record are refused the same way by both,
		// for lists and bulk actions, not answered by one and failed by
		// the other's database.
		for _, at := range []time.Time{time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)} {
			for _, f := range []durable.RunFilter{{CreatedAfter: at}, {CreatedBefore: at}, {FinishedAfter: at}, {FinishedBefore: at}} {
				_, err = e.ListRuns(ctx, durable.ListOptions{RunFilter: f})
				require.ErrorIs(t, err, durable.ErrInvalidFilter, "%+v", f)
				_, err = e.CancelRuns(ctx, f, "")
				require.ErrorIs(t, err, durable.ErrInvalidFilter, "%+v", f)
				_, err = e.ReplayRuns(ctx, f, durable.ReplayOptions{})
				require.ErrorIs(t, err, durable.ErrInvalidFilter, "%+v", f)
			}
		}

		// A cursor edited by hand (its fingerprint left as it was) to a
		// time no store can record is refused too.
		page, err := e.ListRuns(ctx, durable.ListOptions{Limit: 2})
		require.NoError(t, err)
		require.NotEmpty(t, page.Next)
		js, err := base64.RawURLEncoding.DecodeString(page.Next)
		require.NoError(t, err)
		var c map[string]any
		require.NoError(t, json.Unmarshal(js, &c))
		c["c"] = int64(-1) << 62
		js, err = json.Marshal(c)
		require.NoError(t, err)
		_, err = e.ListRuns(ctx, durable.ListOptions{Limit: 2, Cursor: base64.RawURLEncoding.EncodeToString(js)})
		require.ErrorIs(t, err, durable.ErrInvalidCursor)
	})
}

// TestRetention: the leader deletes runs that settled longer than
// Config.Retention ago, and never a run in flight.
func TestRetention(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		retention := h.duration(time.Hour, time.Second)
		wf := durable.NewWorkflow[int]("kept-a-while")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		long := durable.NewWorkflow[int]("long")
		durable.Sleep(long, "nap", 20*retention)
		e := h.start(durable.Config{Retention: retention}, wf, long)
		ctx := h.ctx(time.Minute + 30*retention)
		res, err := wf.Run(ctx, e, "t", 1)
		require.NoError(t, err)
		sleeper, err := long.RunNoWait(ctx, e, "t", 0)
		require.NoError(t, err)
		h.eventually(10*retention+time.Minute, func() bool {
			_, err := e.Get(ctx, res.ID)
			return errors.Is(err, durabletype.ErrRunNotFound)
		}, "the settled run is pruned")
		_, err = e.Events(ctx, res.ID)
		require.ErrorIs(t, err, durabletype.ErrRunNotFound)
		got, err := e.Get(ctx, sleeper)
		require.NoError(t, err, "a run in flight is never pruned")
		require.Equal(t, durabletype.RunRunning, got.Status)
	})
}

// TestPruneOnDemand: Engine.Prune deletes what settled longer ago than it
// is told, however many there are.
func TestPruneOnDemand(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		wf := durable.NewWorkflow[int]("pruned")
		durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) { return in, nil })
		e := h.start(durable.Config{Retention: durable.KeepForever}, wf)
		ctx := h.ctx(10 * time.Minute)
		triggers := make([]durable.Trigger[int], 700)
		for i := range triggers {
			triggers[i] = durable.Trigger[int]{Tenant: "t", Input: i}
		}
		ids, err := wf.RunManyNoWait(ctx, e, triggers)
		require.NoError(t, err)
		for _, id := range ids {
			_, err := e.Wait(ctx, id)
			require.NoError(t, err)
		}
		n, err := e.Prune(ctx, time.Hour)
		require.NoError(t, err)
		require.Zero(t, n, "nothing settled an hour ago")
		time.Sleep(h.duration(time.Minute, 50*time.Millisecond)) // let the settlements age (virtual in memory)
		n, err = e.Prune(ctx, h.duration(time.Second, 10*time.Millisecond))
		require.NoError(t, err)
		require.Equal(t, 700, n, "more than one batch")
		page, err := e.ListRuns(ctx, durable.ListOptions{})
		require.NoError(t, err)
		require.Empty(t, page.Runs)
		_, err = e.Prune(ctx, -time.Second)
		require.ErrorIs(t, err, durable.ErrInvalidFilter)
	})
}

// TestFindRuns: a run found by its idempotency key and by a value in its
// input, on the engine and in a tenant's scope, across pages; a bad input
// filter is refused for lists and bulk actions alike.
func TestFindRuns(t *testing.T) {
	both(t, func(t *testing.T, h *harness) {
		type invoice struct {
			Customer string `json:"customer"`
			Total    int    `json:"total"`
		}
		wf := durable.NewWorkflow[invoice]("invoices")
		durable.Step(wf, "a", func(ctx durable.Context, in invoice) (int, error) { return in.Total, nil })
		e := h.start(durable.Config{}, wf)
		ctx := h.ctx(time.Minute)
		want := map[string]uuid.UUID{}
		for i := range 6 {
			key := fmt.Sprintf("inv-%d", i)
			id, err := wf.RunNoWait(ctx, e, []string{"t1", "t2"}[i%2], invoice{Customer: fmt.Sprintf("c-%d", i%3), Total: i},
				durable.WithIdempotencyKey(key))
			require.NoError(t, err)
			want[key] = id
		}
		page, err := e.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{IdempotencyKey: "inv-4"}})
		require.NoError(t, err)
		require.Len(t, page.Runs, 1)
		require.Equal(t, want["inv-4"], page.Runs[0].ID)
		page, err = e.Tenant("t2").ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{IdempotencyKey: "inv-4"}})
		require.NoError(t, err)
		require.Empty(t, page.Runs, "inv-4 is t1's")

		// c-0 is the customer of runs 0 and 3; one a page.
		f := durable.RunFilter{InputContains: json.RawMessage(`{"customer": "c-0"}`)}
		var got []uuid.UUID
		opts := durable.ListOptions{RunFilter: f, Limit: 1}
		for {
			page, err := e.ListRuns(ctx, opts)
			require.NoError(t, err)
			for _, r := range page.Runs {
				got = append(got, r.ID)
			}
			if page.Next == "" {
				break
			}
			opts.Cursor = page.Next
		}
		require.ElementsMatch(t, []uuid.UUID{want["inv-0"], want["inv-3"]}, got)
		page, err = e.Tenant("t2").ListRuns(ctx, durable.ListOptions{RunFilter: f})
		require.NoError(t, err)
		require.Len(t, page.Runs, 1)
		require.Equal(t, want["inv-3"], page.Runs[0].ID)

		// An empty input filter filters nothing, as every zero field.
		page, err = e.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{InputContains: json.RawMessage{}}})
		require.NoError(t, err)
		require.Len(t, page.Runs, 6)

		for _, bad := range []durable.RunFilter{
			{InputContains: json.RawMessage(`{"customer":`)},
			{InputContains: json.RawMessage(`{} {}`)},
			{InputContains: json.RawMessage(`"\u0000"`)},
			{InputContains: json.RawMessage(`"` + strings.Repeat("x", 20<<10) + `"`)},
			{IdempotencyKey: "bad\x00key"},
			{IdempotencyKey: strings.Repeat("k", 256)},
		} {
			_, err = e.ListRuns(ctx, durable.ListOptions{RunFilter: bad})
			require.ErrorIs(t, err, durable.ErrInvalidFilter, "%q %q", bad.InputContains, bad.IdempotencyKey)
			_, err = e.CancelRuns(ctx, bad, "")
			require.ErrorIs(t, err, durable.ErrInvalidFilter, "%q %q", bad.InputContains, bad.IdempotencyKey)
		}
	})
}
