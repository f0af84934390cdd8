package crashtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/cmd/durable/internal/demo"
	"github.com/effectivelabs/durable/cmd/durable/internal/workloads"
)

// TestStoppedDuringSleep stops every worker while runs are in their durable
// sleep, lets the sleep fall due with no process running, and restarts the
// workers: every run must wake and complete.
//
// The sleep's length is recorded in a run's shape when it is triggered, so
// the workers are given a fraud window of an hour: the runs, triggered here
// with 5s, must still wake after 5s.
func TestStoppedDuringSleep(t *testing.T) {
	h := newHarness(t)
	const runs = 20
	const window = 5 * time.Second
	flags := []string{"--fraud-window", "1h", "--dead-after", "3s", "--heartbeat-interval", "500ms",
		"--drain-timeout", "5s", "--concurrency", "10"}
	ws := []*worker{h.startWorker("s1", flags...), h.startWorker("s2", flags...)}
	ctx := context.Background()
	requireWorkers := func(msg string, want ...string) {
		t.Helper()
		listed, err := h.client.Workers(ctx)
		require.NoError(t, err)
		var ids []string
		for _, w := range listed {
			require.True(t, w.Live, "%s: %s is live", msg, w.ID)
			ids = append(ids, w.ID)
		}
		require.Equal(t, want, ids, msg)
	}
	requireWorkers("both processes are registered once up", "s1", "s2")

	flow := workloads.New(workloads.Options{FraudWindow: window}).Demo
	ts := make([]durable.Trigger[demo.Order], runs)
	for i := range ts {
		customer := fmt.Sprintf("customer-%d", i%4)
		ts[i] = durable.Trigger[demo.Order]{Tenant: customer, Input: demo.Order{
			ID: fmt.Sprintf("O-%d", i), Customer: customer, Cents: 100 + i, Items: []string{"book"},
		}}
	}
	_, err := flow.Workflow.RunManyNoWait(ctx, h.client, ts)
	require.NoError(t, err)

	sleeping := func() (n int, firstDue, lastDue time.Time) {
		err := h.pool.QueryRow(ctx, `SELECT count(*), coalesce(min(due_at), 'epoch'), coalesce(max(due_at), 'epoch') FROM `+
			h.table("tasks")+` WHERE name = 'fraud-window' AND state = 'SLEEPING'`).Scan(&n, &firstDue, &lastDue)
		require.NoError(t, err)
		return n, firstDue, lastDue
	}
	deadline := time.Now().Add(30 * time.Second)
	for n, _, _ := sleeping(); n < runs; n, _, _ = sleeping() {
		require.True(t, time.Now().Before(deadline), "only %d of %d runs reached their sleep within 30s", n, runs)
		time.Sleep(50 * time.Millisecond) // polling a condition
	}

	for _, w := range ws {
		require.Equal(t, 0, w.terminate(30*time.Second), "%s exits 0 on SIGTERM", w.id)
	}
	stopped := time.Now()
	requireWorkers("a worker stopped by SIGTERM removes its record")
	unserved, err := h.client.Unserved(ctx, "order-processing")
	require.NoError(t, err)
	require.Equal(t, []string{"order-processing"}, unserved, "with no worker, the sleeping runs' workflow is unserved")
	n, firstDue, lastDue := sleeping()
	require.Equal(t, runs, n, "stopping the workers does not disturb a sleep")
	require.True(t, firstDue.After(stopped), "the workers stopped after a sleep was due (first due %s, stopped %s)", firstDue, stopped)
	t.Logf("%d runs asleep; all workers stopped %s before the first sleep was due, %s before the last",
		runs, firstDue.Sub(stopped).Round(time.Millisecond), lastDue.Sub(stopped).Round(time.Millisecond))

	// Nobody runs while the sleeps fall due: this wait is the scenario.
	time.Sleep(time.Until(lastDue.Add(time.Second)))
	n, _, _ = sleeping()
	require.Equal(t, runs, n, "with no worker running nothing wakes")
	_, settled, _, err := h.counts(ctx)
	require.NoError(t, err)
	require.Zero(t, settled)

	restarted := time.Now()
	for _, w := range ws {
		w.start()
	}
	h.waitSettled(runs, time.Minute)
	t.Logf("all %d runs completed %s after the workers restarted", runs, time.Since(restarted).Round(time.Millisecond))

	s := h.snapshot()
	verifyRecorded(t, s, runs)
	var latest time.Duration
	for _, r := range s.runs {
		evs := s.events[taskKey{r.id, "fraud-window"}]
		require.Len(t, evs, 2, "run %s: %s", r.id, logString(evs))
		sleep, woken := evs[0], evs[1]
		require.Equal(t, "SLEEPING", sleep.typ)
		require.Equal(t, "WOKEN", woken.typ)
		require.True(t, woken.at.After(restarted), "run %s woke at %s, before the workers restarted at %s", r.id, woken.at, restarted)
		latest = max(latest, woken.at.Sub(restarted))
		// The shape recorded at trigger time says 3s, whatever the workers say.
		require.Equal(t, window, sleep.due.Sub(sleep.at), "run %s", r.id)
		require.False(t, woken.at.Before(sleep.due), "run %s woke before its sleep was due", r.id)
		res, err := h.client.Get(ctx, uuid.MustParse(r.id))
		require.NoError(t, err)
		out, err := flow.Finalize.Result(res)
		require.NoError(t, err)
		require.Contains(t, out, "done: shipped by ACME")
	}
	t.Logf("every sleep woke within %s of the restart", latest.Round(time.Millisecond))
	for _, w := range ws {
		require.Equal(t, 0, w.terminate(30*time.Second), "%s exits 0 on SIGTERM", w.id)
	}
}
