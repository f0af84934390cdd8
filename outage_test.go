package durable_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// An outage of the store that silences every worker, the leader included,
// for longer than DeadAfter (a database restart, a failover, a partition)
// must not read as every worker dead. Each test runs on both stores
// (suite_test.go).

// errOutage is what outageStore's calls return while the store is down: a
// transient error, as a lost connection is.
var errOutage = durabletype.Transient(errors.New("injected: the database is unreachable"))

// outageStore is a store that an engine reaches through a network that can
// fail: while down, the calls an engine's loops make (claims, outcomes,
// heartbeats, timers, the leader's passes, the inbox) fail with errOutage.
// When the outage ends (heal), the heartbeats may stay cut off until the
// leader's first pass since has succeeded: the order in which a fleet's
// connections come back is anyone's.
type outageStore struct {
	store.Store

	down        atomic.Bool
	heartbeatUp atomic.Bool // heartbeats go through (while not down)
	healing     atomic.Bool // the next successful pass lets heartbeats through

	mu      sync.Mutex
	passes  []*store.RescueTasksParams // the leader's passes that reached the store
	failed  int                        // the leader's passes that did not
	beatsUp int                        // heartbeats that failed
}

func newOutageStore(s store.Store) *outageStore {
	o := &outageStore{Store: s}
	o.heartbeatUp.Store(true)
	return o
}

// cut begins an outage.
func (o *outageStore) cut() {
	o.heartbeatUp.Store(false)
	o.down.Store(true)
}

// heal ends the outage; heartbeats go through once the leader's next pass
// has (lateHeartbeats), or at once.
func (o *outageStore) heal(lateHeartbeats bool) {
	if lateHeartbeats {
		o.healing.Store(true)
	} else {
		o.heartbeatUp.Store(true)
	}
	o.down.Store(false)
}

// stats returns the leader's passes that reached the store, those that
// failed, and the heartbeats that failed.
func (o *outageStore) stats() (passes []*store.RescueTasksParams, failed, failedBeats int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*store.RescueTasksParams(nil), o.passes...), o.failed, o.beatsUp
}

// Listen passes the store's notifications on (both stores have them). A
// real outage would cut them too; the listener's resync after it is what
// TestHeartbeatServiceResync covers.
func (o *outageStore) Listen(ctx context.Context, deliver func(store.Notification)) error {
	return o.Store.(store.Listener).Listen(ctx, deliver)
}

func (o *outageStore) ClaimTasks(ctx context.Context, p *store.ClaimTasksParams) ([]*store.ClaimedTask, error) {
	if o.down.Load() {
		return nil, errOutage
	}
	return o.Store.ClaimTasks(ctx, p)
}

func (o *outageStore) FinishTasks(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error) {
	if o.down.Load() {
		return nil, errOutage
	}
	return o.Store.FinishTasks(ctx, p)
}

func (o *outageStore) Heartbeat(ctx context.Context, p *store.HeartbeatParams) (*store.HeartbeatResult, error) {
	if o.down.Load() || !o.heartbeatUp.Load() {
		o.mu.Lock()
		o.beatsUp++
		o.mu.Unlock()
		return nil, errOutage
	}
	return o.Store.Heartbeat(ctx, p)
}

func (o *outageStore) FireTimers(ctx context.Context, p *store.FireTimersParams) (*store.FireTimersResult, error) {
	if o.down.Load() {
		return nil, errOutage
	}
	return o.Store.FireTimers(ctx, p)
}

func (o *outageStore) ApplyInbox(ctx context.Context, p *store.ApplyInboxParams) (*store.ApplyInboxResult, error) {
	if o.down.Load() {
		return nil, errOutage
	}
	return o.Store.ApplyInbox(ctx, p)
}

func (o *outageStore) RescueTasks(ctx context.Context, p *store.RescueTasksParams) (*store.RescueTasksResult, error) {
	if o.down.Load() {
		o.mu.Lock()
		o.failed++
		o.mu.Unlock()
		return nil, errOutage
	}
	res, err := o.Store.RescueTasks(ctx, p)
	if err == nil {
		o.mu.Lock()
		o.passes = append(o.passes, p)
		o.mu.Unlock()
		if o.healing.CompareAndSwap(true, false) {
			o.heartbeatUp.Store(true)
		}
	}
	return res, err
}

// longStep returns a workflow whose one step blocks until release is
// closed (or its claim is lost), and counts the step's executions. A
// rescue counts as an attempt, so the step may be retried once.
func longStep(name string, release <-chan struct{}, executions *atomic.Int32, started chan<- int) *durable.Workflow[int] {
	wf := durable.NewWorkflow[int](name)
	durable.Step(wf, "long", func(ctx durable.Context, in int) (int, error) {
		executions.Add(1)
		started <- ctx.Attempt()
		select {
		case <-release:
			return in, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 1, InitialDelay: time.Millisecond}))
	return wf
}

// TestOutageLongerThanDeadAfterRescuesNothing: the store is unreachable for
// twice DeadAfter while a step runs, for the worker and for the leader
// alike. When it comes back the leader reaches it before the worker's
// heartbeats do; it rescues nothing all the same, because it rescues only
// after 2×HeartbeatInterval of contact, and by then the live worker has
// vouched for its step again. The step runs once, and its run completes
// with that attempt. (Before, the leader's first pass rescued the step,
// whose heartbeat was older than DeadAfter, and it ran a second time.)
func TestOutageLongerThanDeadAfterRescuesNothing(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		// On PostgreSQL, a heartbeat of a second: the worker's first beat
		// after the outage lands a second or more before the leader may
		// rescue (2×HeartbeatInterval of contact), on a loaded machine too.
		heartbeat := h.duration(5*time.Second, time.Second)
		deadAfter := h.duration(30*time.Second, 4*time.Second)
		release := make(chan struct{})
		var executions atomic.Int32
		started := make(chan int, 4)
		wf := longStep("outage", release, &executions, started)
		net := newOutageStore(h.store)
		e := h.startOn(net, durable.Config{HeartbeatInterval: heartbeat, DeadAfter: deadAfter}, wf)
		ctx := h.ctx(h.duration(time.Hour, time.Minute))
		id, err := wf.RunNoWait(ctx, h.client(), "t", 7)
		require.NoError(t, err)
		require.Equal(t, 1, <-started)

		net.cut()
		cutAt := time.Now()
		h.eventually(h.duration(time.Hour, time.Minute), func() bool {
			_, failed, beats := net.stats()
			return failed >= 2 && beats >= 2 && time.Since(cutAt) >= 2*deadAfter
		}, "the leader's passes and the worker's heartbeats fail for 2×DeadAfter")
		_, failedPasses, _ := net.stats()
		net.heal(true)

		// The leader's passes since the outage, until one could rescue.
		h.eventually(h.duration(time.Hour, time.Minute), func() bool {
			passes, _, _ := net.stats()
			return countPasses(passes, deadAfter) >= 2
		}, "the leader makes passes that may rescue")
		close(release)

		res := h.wait(e, id, h.duration(time.Hour, 20*time.Second))
		require.Equal(t, durabletype.RunCompleted, res.Status)
		require.Equal(t, int32(1), executions.Load(), "the step ran once: the outage did not make its worker dead")
		require.Equal(t, []string{"QUEUED/0", "STARTED/1", "COMPLETED/1"}, stepEvents(t, e, id, "long"))
		passes, _, _ := net.stats()
		require.Positive(t, len(passes)-countPasses(passes, deadAfter),
			"the leader's first pass after the outage rescued nothing (its DeadAfter admits no heartbeat)")
		t.Logf("outage of %s (DeadAfter %s): %d passes failed, %d passes after it, the step ran once",
			2*deadAfter, deadAfter, failedPasses, len(passes))
	})
}

// countPasses counts the leader's passes that could rescue a step silent
// for deadAfter.
func countPasses(passes []*store.RescueTasksParams, deadAfter time.Duration) int {
	n := 0
	for _, p := range passes {
		if p.DeadAfter <= deadAfter {
			n++
		}
	}
	return n
}

// TestNewLeaderWaitsForHeartbeats: a leader that begins to lead (here, an
// engine started while another's step has been silent for twice DeadAfter)
// rescues that step only once it has been in contact with the store for
// 2×HeartbeatInterval, and then does: a step whose worker is really dead
// is rescued, after that grace and no later than one pass interval more.
func TestNewLeaderWaitsForHeartbeats(t *testing.T) {
	t.Parallel()
	both(t, func(t *testing.T, h *harness) {
		heartbeat := h.duration(5*time.Second, 200*time.Millisecond)
		deadAfter := h.duration(30*time.Second, time.Second)
		cfg := durable.Config{HeartbeatInterval: heartbeat, DeadAfter: deadAfter}
		release := make(chan struct{})
		var executions atomic.Int32
		started := make(chan int, 4)
		wf := longStep("newleader", release, &executions, started)
		// The doomed worker: cut off from the store for good once its step
		// runs (its own leader's passes included).
		doomed := newOutageStore(h.another())
		ghost := h.launchOn(doomed, cfg, wf)
		ctx := h.ctx(h.duration(time.Hour, time.Minute))
		_, err := wf.RunNoWait(ctx, h.client(), "t", 1)
		require.NoError(t, err)
		require.Equal(t, 1, <-started)
		doomed.cut()
		silent := time.Now()
		h.eventually(h.duration(time.Hour, time.Minute), func() bool { return time.Since(silent) >= 2*deadAfter },
			"the doomed worker is silent for 2×DeadAfter")

		leaderAt := time.Now()
		watched := newOutageStore(h.another())
		_ = h.startOn(watched, cfg, wf)
		var attempt int
		select {
		case attempt = <-started:
		case <-ctx.Done():
			passes, failed, beats := watched.stats()
			for _, p := range passes {
				t.Logf("pass %s %s", p.Now, p.DeadAfter)
			}
			t.Fatalf("the step was not rescued (%d passes, %d failed, %d beats failed)", len(passes), failed, beats)
		}
		rescuedAfter := time.Since(leaderAt)
		require.Equal(t, 1, attempt, "a lost attempt is not counted: the step runs again as attempt 1")
		t.Logf("a new leader rescued a step silent for %s, %s after it began to lead (grace %s)",
			time.Since(silent)-rescuedAfter, rescuedAfter, 2*heartbeat)
		require.GreaterOrEqual(t, rescuedAfter, 2*heartbeat, "rescued before the grace ended")
		passes, _, _ := watched.stats()
		require.NotEmpty(t, passes)
		require.Greater(t, passes[0].DeadAfter, deadAfter, "the new leader's first pass rescues nothing")
		if h.virtual {
			require.LessOrEqual(t, rescuedAfter, 2*heartbeat+deadAfter/4, "rescued within a pass interval of the grace's end")
		}

		// The doomed worker comes back: its late outcome is stale, and it
		// stops cleanly.
		doomed.heal(false)
		close(release)
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, ghost.Stop(stopCtx))
	})
}
