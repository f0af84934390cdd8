package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/cmd/durable/internal/workloads"
	"github.com/effectivelabs/durable/internal/core/cronslot"
)

// Settings of the frozen-leader proof, and the bounds docs/semantics.md
// ("Leader") states for them.
const (
	freezeLease     = 5 * time.Second // --leader-lease, shorter than the default to keep the test short
	freezeDeadAfter = 5 * time.Second
	freezeHeartbeat = time.Second
	freezeFor       = 40 * time.Second
	// idleTxTimeout is the idle_in_transaction_session_timeout of the
	// store's transactions: a process stopped between two round trips of a
	// transaction holds its locks (the runs it touches, the lease row of a
	// fenced write) until the server ends its session.
	idleTxTimeout = 10 * time.Second
	// freezeStall is the stated bound on how late a timer or a cron slot
	// due while the leader is frozen fires: 1.5 leases, and at least the
	// idle-transaction timeout.
	freezeStall = max(freezeLease*3/2, idleTxTimeout)
	// freezeSlack covers what the bound leaves out on a loaded 2-core
	// machine: the transactions, notifications and claims.
	freezeSlack = 5 * time.Second
	// freezeRescue bounds when a step the frozen leader had running runs
	// again elsewhere: once its heartbeats are DeadAfter old and the new
	// leader has been in contact for 2 heartbeats, within a rescue pass
	// (DeadAfter/4), queued again within the spread of a rescue
	// (dag.LostSpread: DeadAfter/4 at most).
	freezeRescue = max(freezeDeadAfter, freezeLease*3/2+2*freezeHeartbeat) + freezeDeadAfter/4 + freezeDeadAfter/4 +
		freezeSlack
)

// TestFrozenLeader stops the leader (SIGSTOP) for 40s under load, then lets
// it go on (SIGCONT): three workers run chaos runs triggered steadily (each
// with a 1s durable sleep) and a schedule fires every second. Another worker
// must take the leadership over within the bound, and with it the timers,
// the schedule and the rescue of the frozen worker's steps; once the frozen
// worker wakes, nothing it does may be applied twice, and it must not lead
// beside the new leader.
//
// Checked: every sleep woke within freezeStall (+ slack) of being due;
// every slot of the schedule fired once or, during the takeover only, was
// skipped by the misfire rule and counted in the next slot's Missed; every
// step the frozen worker had running ran again elsewhere within
// freezeRescue; every run completed with each step's outcome recorded once
// (verifyRecorded, verifyChaos); the frozen leader reports its leadership
// lost when it wakes, and the new leader keeps its lease (and term).
func TestFrozenLeader(t *testing.T) {
	h := newHarness(t)
	flags := []string{"--record-executions", "--dead-after", freezeDeadAfter.String(), "--heartbeat-interval", freezeHeartbeat.String(),
		"--leader-lease", freezeLease.String(), "--drain-timeout", "5s", "--concurrency", "25", "--poll-interval", "1s"}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	ws := []*worker{h.startWorker("f1", flags...), h.startWorker("f2", flags...), h.startWorker("f3", flags...)}
	begin := time.Now()
	elapsed := func() string { return fmt.Sprintf("%6.2fs", time.Since(begin).Seconds()) }
	ctx := context.Background()

	// A schedule firing every second.
	set := workloads.New(workloads.Options{})
	require.NoError(t, h.client.Register(set.Noop))
	sc, err := set.Noop.Schedule(ctx, h.client, "cron", "every-second", 0, "* * * * * *", durable.ScheduleOptions{})
	require.NoError(t, err)

	// Chaos runs, 2 every 500ms, until stopped.
	ap := newApprover(h.client, set.Chaos, rand.New(rand.NewPCG(seed, seed>>1)))
	tctx, stopTriggers := context.WithCancel(ctx)
	defer stopTriggers()
	triggered := make(chan error, 1)
	var chaosRuns int
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n += 2 {
			if err := ap.trigger(ctx, []int{n, n + 1}); err != nil {
				triggered <- err
				return
			}
			select {
			case <-tick.C:
			case <-tctx.Done():
				chaosRuns = n + 2
				triggered <- ap.flush(ctx)
				return
			}
		}
	}()
	watch := func(d time.Duration) { // the test's own rhythm, failing on a trigger error
		t.Helper()
		select {
		case err := <-triggered:
			require.Failf(t, "triggering stopped early", "%v", err)
		case <-time.After(d):
		}
	}
	watch(8 * time.Second)

	// Freeze the leader while it runs chaos steps (its own, as a worker),
	// so that there are steps for the new leader to rescue.
	leader := h.leader(ws)
	term0, holder0 := h.lease(ctx)
	require.Equal(t, leader.id, holder0)
	var frozenAt time.Time
	var orphans []orphan
	for try := 0; ; try++ {
		require.Less(t, try, 50, "the leader never had a step running when stopped")
		frozenAt = leader.signalAt(syscall.SIGSTOP)
		for _, k := range leader.runningOf() {
			orphans = append(orphans, orphan{attemptKey: k, worker: leader.id, killedAt: frozenAt})
		}
		if len(orphans) > 0 {
			break
		}
		leader.signal(syscall.SIGCONT)
		watch(200 * time.Millisecond)
	}
	t.Logf("%s SIGSTOP the leader %s (lease term %d) with %d steps running", elapsed(), leader.id, term0, len(orphans))

	// Another worker takes the lease over, with the next term, and is
	// listed as the leader.
	var next string
	var term int64
	deadline := frozenAt.Add(freezeStall + freezeSlack)
	for {
		term, next = h.lease(ctx)
		if next != "" && next != leader.id {
			break
		}
		require.True(t, time.Now().Before(deadline), "nobody took the lease over within %s of the freeze (holder %q)", freezeStall+freezeSlack, next)
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
	takeover := time.Since(frozenAt)
	t.Logf("%s %s took the lease over with term %d, %s after the freeze", elapsed(), next, term, takeover.Round(time.Millisecond))
	require.Greater(t, term, term0)
	listed, err := h.client.Workers(ctx)
	require.NoError(t, err)
	for _, w := range listed {
		require.Equal(t, w.ID == next, w.Leader, "workers lists %s as the leader, and nobody else (%s)", next, w.ID)
	}

	watch(time.Until(frozenAt.Add(freezeFor)))
	wokeAt := leader.signalAt(syscall.SIGCONT)
	t.Logf("%s SIGCONT %s after %s", elapsed(), leader.id, wokeAt.Sub(frozenAt).Round(time.Millisecond))

	// The woken leader finds its leadership lost at once (its lease
	// expired on its own clock, or its first fenced write is refused),
	// stops its duties, and does not take the lease back.
	lost := waitLogged(t, leader, frozenAt, "pgstore: leadership lost", 15*time.Second)
	t.Logf("%s %s: %s", elapsed(), leader.id, lost)
	waitLogged(t, leader, frozenAt, "durable: no longer leading", 15*time.Second)
	watch(2 * freezeLease)
	termNow, holderNow := h.lease(ctx)
	require.Equal(t, next, holderNow, "the new leader keeps the lease after the old one woke")
	require.Equal(t, term, termNow, "no other leadership began")

	// Stop the load and the schedule, and let every run settle.
	stopTriggers()
	require.NoError(t, <-triggered, "triggering")
	paused, err := h.client.PauseSchedule(ctx, "cron", "every-second")
	require.NoError(t, err)
	require.False(t, paused.LastSlot.IsZero())
	lastSlot := paused.LastSlot
	var cronRuns int
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT count(*) FROM `+h.table("runs")+` WHERE workflow = $1`, workloads.Noop).Scan(&cronRuns))
	h.waitSettled(chaosRuns+cronRuns, 2*time.Minute)
	t.Logf("%s all %d chaos runs and %d cron runs settled", elapsed(), chaosRuns, cronRuns)
	for _, w := range ws {
		require.Equal(t, 0, w.terminate(30*time.Second), "%s exits 0 on SIGTERM", w.id)
	}

	// Nothing applied twice: every run completed, every step's outcome
	// recorded once, the chaos runs' outputs right.
	s := h.snapshot()
	rs := verifyRecorded(t, s, chaosRuns+cronRuns)
	cs := verifyChaos(t, h, s)
	t.Logf("runs %d (%d chaos, %d cron; all COMPLETED), tasks %d, recorded outcomes %d, duplicates %d; executions %d, re-executions %d",
		rs.runs, chaosRuns, cronRuns, rs.tasks, rs.outcomes, rs.duplicates, cs.executions, cs.reexecutions)

	// The frozen worker's steps ran again elsewhere.
	rec := measureRecovery(s, orphans, freezeRescue)
	t.Logf("steps of the frozen worker: %d ran again after %s (max), %d were recorded before the freeze took hold; bound %s",
		len(rec.times), rec.percentile(1).Round(time.Millisecond), rec.raced, freezeRescue)
	require.Empty(t, rec.missing, "rescued attempts never started again")
	require.NotEmpty(t, rec.times, "no step of the frozen worker was rescued: the test proved nothing about rescues")
	require.Empty(t, rec.late, "steps of the frozen worker ran again later than %s", freezeRescue)

	// Every sleep woke within the bound of being due.
	var worst, worstOutside time.Duration
	var naps, napsInFreeze int
	for _, r := range s.runs {
		evs := s.events[taskKey{r.id, "nap"}]
		if r.workflow != workloads.Chaos {
			continue
		}
		require.Len(t, evs, 2, "run %s: %s", r.id, logString(evs))
		due, woken := evs[0].due, evs[1].at
		require.Equal(t, "WOKEN", evs[1].typ)
		require.False(t, woken.Before(due), "run %s woke before its sleep was due", r.id)
		d := woken.Sub(due)
		naps++
		if due.After(frozenAt) && due.Before(frozenAt.Add(takeover)) {
			napsInFreeze++
		}
		worst = max(worst, d)
		if due.Before(frozenAt) || due.After(frozenAt.Add(freezeStall+freezeSlack)) {
			worstOutside = max(worstOutside, d)
		}
	}
	t.Logf("sleeps: %d woke, %d of them due during the takeover; worst wake delay %s (%s away from the freeze); bound %s + %s slack",
		naps, napsInFreeze, worst.Round(time.Millisecond), worstOutside.Round(time.Millisecond), freezeStall, freezeSlack)
	require.NotZero(t, napsInFreeze, "no sleep fell due during the takeover: the test proved nothing about timers")
	require.LessOrEqual(t, worst, freezeStall+freezeSlack, "a sleep woke later than the bound")

	// Every slot of the schedule fired once, or was skipped by the misfire
	// rule while nobody led (counted in the Missed the workers logged).
	var fired, skipped int
	var skippedOutside []string
	for at := sc.NextAt; !at.After(lastSlot); at = at.Add(time.Second) {
		var n int
		require.NoError(t, h.pool.QueryRow(ctx, `SELECT count(*) FROM `+h.table("runs")+` WHERE id = $1`,
			cronslot.RunID(sc.ID, at)).Scan(&n))
		if n == 1 {
			fired++
			continue
		}
		skipped++
		if at.Before(frozenAt.Add(-time.Second)) || at.After(frozenAt.Add(freezeStall+freezeSlack)) {
			skippedOutside = append(skippedOutside, at.Format("15:04:05"))
		}
	}
	missed := 0
	for _, w := range ws {
		missed += loggedMissed(t, w, "every-second")
	}
	window := int(lastSlot.Sub(sc.NextAt)/time.Second) + 1
	t.Logf("cron: %d slots, %d fired (one run each), %d skipped during the takeover (workers logged %d missed)",
		window, fired, skipped, missed)
	require.Equal(t, cronRuns, fired, "exactly the fired slots have runs")
	require.Equal(t, skipped, missed, "every slot not fired was skipped by the misfire rule and counted")
	require.Empty(t, skippedOutside, "slots skipped away from the freeze")
}

// signalAt sends sig to the worker's process and returns when it was sent.
func (w *worker) signalAt(sig syscall.Signal) time.Time {
	at := time.Now()
	w.signal(sig)
	return at
}

// lease reads the leader's lease: its term, and the worker holding it now
// ("" once it expired).
func (h *harness) lease(ctx context.Context) (int64, string) {
	h.t.Helper()
	var term int64
	var holder string
	require.NoError(h.t, h.pool.QueryRow(ctx, `SELECT term, CASE WHEN expires_at > now() THEN worker ELSE '' END FROM `+
		h.table("leader")).Scan(&term, &holder))
	return term, holder
}

// waitLogged waits for a line of w's log, written after since, that
// contains text, and returns it.
func waitLogged(t *testing.T, w *worker, since time.Time, text string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, line := range logLines(t, w) {
			if strings.Contains(line, text) && loggedAt(line).After(since) {
				return line
			}
		}
		require.True(t, time.Now().Before(deadline), "%s did not log %q within %s:\n%s", w.id, text, within, tail(w.logPath, 25))
		time.Sleep(100 * time.Millisecond) // polling a condition
	}
}

func logLines(t *testing.T, w *worker) []string {
	t.Helper()
	b, err := os.ReadFile(w.logPath)
	require.NoError(t, err)
	return strings.Split(string(b), "\n")
}

var logTime = regexp.MustCompile(`^time=(\S+)`)

// loggedAt is the time of a log line of the worker's text handler, or the
// zero time.
func loggedAt(line string) time.Time {
	m := logTime.FindStringSubmatch(line)
	if m == nil {
		return time.Time{}
	}
	at, _ := time.Parse(time.RFC3339Nano, m[1])
	return at
}

// loggedMissed sums the slots of a schedule that w logged as missed
// ("schedule missed slots; fired the latest only").
func loggedMissed(t *testing.T, w *worker, schedule string) int {
	t.Helper()
	re := regexp.MustCompile(`schedule missed slots.* schedule=` + regexp.QuoteMeta(schedule) + ` missed=(\d+)`)
	n := 0
	for _, line := range logLines(t, w) {
		if m := re.FindStringSubmatch(line); m != nil {
			k, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			n += k
		}
	}
	return n
}
