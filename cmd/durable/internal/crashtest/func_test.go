package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/cmd/durable/internal/workloads"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// TestFunctionChaos is the crash proof of durable functions: 200 runs of
// crash-fn (see package workloads: steps one after another, one retried
// after a durable backoff, a transactional step, a durable sleep, four
// steps in parallel, a child run of crash-fn-child, which sleeps too, a wait
// for an event and a wait for a signal) on three worker processes, while a
// worker is SIGKILLed every second or two (the leader twice), and restarted,
// until the runs are triggered and most have settled.
// The test sends each run's event (some before the run is triggered, the
// others later) and its signal (later, at random).
//
// Then every run and every child run must have COMPLETED, and:
//   - each run has exactly its calls' records, in order, each COMPLETED
//     with exactly one recorded outcome in its log (no step's result
//     recorded twice), and its body one COMPLETED;
//   - each step's recorded result is that of one of its executions (the
//     nonce it returned is in fn_executions), and no execution of a step
//     has an attempt beyond the one recorded (none ran after its result
//     was recorded);
//   - the run's output holds what its records hold: the function's last
//     execution got each call's recorded result, the event and the signal
//     sent, and the child run's output;
//   - the transactional step left exactly one row per run in fn_effects,
//     that of the execution whose result was recorded.
//
// Executions are at least once: the re-executions the kills caused are
// counted and logged; the test fails if no kill cut a body off while it
// ran (none was rescued), as it would then prove nothing.
func TestFunctionChaos(t *testing.T) {
	h := newHarness(t)
	const runs = 200
	flags := []string{"--record-executions", "--dead-after", chaosDeadAfter.String(), "--heartbeat-interval", chaosHeartbeat.String(),
		"--leader-lease", chaosLease.String(), "--drain-timeout", "5s", "--concurrency", "25", "--poll-interval", "1s"}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	t.Logf("seed %d", seed)

	ws := []*worker{h.startWorker("w1", flags...), h.startWorker("w2", flags...), h.startWorker("w3", flags...)}
	begin := time.Now()
	elapsed := func() string { return fmt.Sprintf("%6.2fs", time.Since(begin).Seconds()) }

	// Trigger 5 runs a second, so that runs are in flight all through the
	// kills. A random half of each batch gets its
	// event before it is triggered (the wait's lookback delivers it); the
	// other half, and every run's signal, are sent 0 to 4 ticks later, at
	// random, some while the run waits, some while it works.
	set := workloads.New(workloads.Options{})
	sendRng := rand.New(rand.NewPCG(seed>>2, seed>>3))
	type pending struct {
		tick   int
		run    uuid.UUID
		n      int
		signal bool
	}
	var early, late, signals int
	triggered := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	send := func(p pending) error {
		if p.signal {
			if err := h.client.Signal(ctx, p.run, workloads.FuncSignal, funcApproval(p.n)); err != nil {
				return fmt.Errorf("signal run %s (%d): %w", p.run, p.n, err)
			}
			return nil
		}
		if _, err := h.client.SendEvent(ctx, chaosTenant(p.n), workloads.FuncKey(p.n), funcPayment(p.n)); err != nil {
			return fmt.Errorf("event of run %d: %w", p.n, err)
		}
		return nil
	}
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		const batch = 5
		var held []pending
		for b, k := 0, 0; ; b, k = b+batch, k+1 {
			var keep []pending
			for _, p := range held {
				if p.tick > k && b < runs {
					keep = append(keep, p)
					continue
				}
				if err := send(p); err != nil {
					triggered <- err
					return
				}
			}
			held = keep
			if b >= runs {
				triggered <- nil
				return
			}
			for n := b; n < min(b+batch, runs); n++ {
				first := sendRng.IntN(2) == 0
				if first {
					if err := send(pending{n: n}); err != nil {
						triggered <- err
						return
					}
					early++
				}
				id, err := set.Func.RunNoWait(ctx, h.client, chaosTenant(n), workloads.FuncInput{N: n})
				if err != nil {
					triggered <- fmt.Errorf("trigger run %d: %w", n, err)
					return
				}
				if !first {
					held = append(held, pending{tick: k + sendRng.IntN(5), run: id, n: n})
					late++
				}
				held = append(held, pending{tick: k + sendRng.IntN(5), run: id, n: n, signal: true})
				signals++
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				triggered <- ctx.Err()
				return
			}
		}
	}()

	// The kills, at their own rhythm (not a synchronisation): a worker
	// running bodies if there is one, so that most kills cut bodies off;
	// the leader at kills 3 and 9.
	var kills, idle, caught int
	var triggerDone bool
	deadline := time.Now().Add(3 * time.Minute)
	for {
		rest(t, time.Duration(700+rng.IntN(1300))*time.Millisecond, &triggered, func() {
			triggerDone = true
			t.Logf("%s all %d runs triggered, their events and signals sent", elapsed(), runs)
		})
		_, settled, _, err := h.counts(ctx)
		require.NoError(t, err)
		if triggerDone && kills >= 20 && settled >= runs*9/10 {
			t.Logf("%s stopping the chaos: %d of %d runs settled", elapsed(), settled, runs)
			break
		}
		require.True(t, time.Now().Before(deadline), "chaos for 3 minutes and only %d of %d runs settled", settled, runs)
		var w *worker
		why := "random"
		if kills == 3 || kills == 9 {
			w, why = h.leader(ws), "the leader"
		} else {
			var busy []*worker
			for _, c := range ws {
				if len(c.runningOf()) > 0 {
					busy = append(busy, c)
				}
			}
			if len(busy) == 0 {
				busy = ws
			}
			w = busy[rng.IntN(len(busy))]
		}
		w.kill()
		running := w.runningOf()
		kills++
		caught += len(running)
		if len(running) == 0 {
			idle++
		}
		t.Logf("%s SIGKILL %s (%s) with %d bodies running", elapsed(), w.id, why, len(running))
		w.start()
	}
	h.waitSettled(runs, 2*time.Minute)
	t.Logf("%s all runs settled", elapsed())
	for _, w := range ws {
		require.Equal(t, 0, w.terminate(30*time.Second), "%s exits 0 on SIGTERM", w.id)
	}

	s := h.snapshot()
	st := verifyFunctions(t, h, s, runs)
	t.Logf("runs %d and child runs %d, all COMPLETED; %d records, each recorded once; %d executions of their steps for %d recorded results: %d re-executions (at least once), %d of flaky's designed failures",
		st.runs, st.children, st.records, st.executions, st.recordedSteps, st.reexecutions, st.flakyFailures)
	t.Logf("kills %d (%d of a worker running no body), catching %d bodies running; bodies rescued (LOST) %d",
		kills, idle, caught, st.lost)
	t.Logf("events: %d sent before their run was triggered, %d after; %d signals; %d waits received theirs as they began (already sent), %d while waiting",
		early, late, signals, st.receivedAtOnce, st.receivedWaiting)
	t.Logf("transactional step: %d rows for %d runs; %d writes made, %d of them rolled back (their execution killed before its result was recorded)",
		st.txRows, runs, st.txWrites, st.txWrites-st.txRows)
	require.Positive(t, st.lost, "no kill cut a body off: the test proved nothing")
	require.Positive(t, st.reexecutions, "no step ran again: the test proved nothing about executions cut off")
	require.Positive(t, st.receivedWaiting, "no event or signal reached a waiting function: the test proved nothing about delivery")
}

func funcPayment(n int) string  { return fmt.Sprintf("paid-%d", n) }
func funcApproval(n int) string { return fmt.Sprintf("ok-%d", n) }

// funcStats are figures of verifyFunctions.
type funcStats struct {
	runs, children, records                           int
	executions, recordedSteps, reexecutions           int
	flakyFailures, lost                               int
	receivedAtOnce, receivedWaiting, txRows, txWrites int
}

// funcExec is a row of fn_executions, fn_effects or fn_writes.
type funcExec struct {
	run, call, nonce string
	attempt          int
}

// verifyFunctions checks the crash-fn runs and their child runs of the
// snapshot s against the rows their steps wrote (see TestFunctionChaos).
func verifyFunctions(t *testing.T, h *harness, s *snapshot, wantRuns int) funcStats {
	t.Helper()
	read := func(table string) []funcExec {
		rows, err := h.pool.Query(context.Background(), `SELECT run_id::text, call, nonce, attempt FROM `+h.table(table))
		require.NoError(t, err)
		xs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (funcExec, error) {
			var x funcExec
			err := row.Scan(&x.run, &x.call, &x.nonce, &x.attempt)
			return x, err
		})
		require.NoError(t, err)
		return xs
	}
	st, p := checkFunctions(s, read("fn_executions"), read("fn_effects"), read("fn_writes"), wantRuns)
	p.require(t, "function runs are wrong")
	return st
}

// checkFunctions is verifyFunctions on its own: what it finds wrong.
func checkFunctions(s *snapshot, execs, effects, writes []funcExec, wantRuns int) (funcStats, *problems) {
	p := &problems{}
	var st funcStats
	type callKey struct{ run, call string }
	execsOf := map[callKey][]funcExec{}
	for _, x := range execs {
		k := callKey{x.run, x.call}
		execsOf[k] = append(execsOf[k], x)
	}
	st.executions = len(execs)
	effectsOf := map[string][]funcExec{}
	for _, x := range effects {
		effectsOf[x.run] = append(effectsOf[x.run], x)
	}
	st.txRows, st.txWrites = len(effects), len(writes)
	byID := map[string]*runRow{}
	var children []*runRow
	for i := range s.runs {
		r := &s.runs[i]
		byID[r.id] = r
		if r.parent != "" {
			children = append(children, r)
		}
	}
	// records returns the records of run r in order, checking that they
	// are calls, each COMPLETED with one recorded outcome; and that its
	// body completed once.
	records := func(r *runRow) []taskRow {
		var recs []taskRow
		for k, task := range s.tasks {
			if k.run == r.id && k.step != "main" {
				recs = append(recs, task)
			}
		}
		slices.SortFunc(recs, func(a, b taskRow) int { return seqOf(a.step) - seqOf(b.step) })
		main := taskKey{r.id, "main"}
		if n := countEvents(s.events[main], "COMPLETED"); n != 1 || s.tasks[main].state != "COMPLETED" {
			p.add("run %s (%s): its body is %s with %d COMPLETED events; log: %s", r.id, r.workflow, s.tasks[main].state, n, logString(s.events[main]))
		}
		st.lost += countEvents(s.events[main], "LOST")
		for _, task := range recs {
			st.records++
			evs := s.events[task.taskKey]
			outcomes := countEvents(evs, "COMPLETED") + countEvents(evs, "WOKEN")
			waits := countEvents(evs, "SLEEPING") + countEvents(evs, "WAITING")
			bad := len(evs) - outcomes - waits - countEvents(evs, "RETRYING")
			if task.state != "COMPLETED" || outcomes != 1 || waits > 1 || bad > 0 {
				p.add("%s/%s: %s (%s), %d recorded outcomes, want COMPLETED and 1; log: %s", r.id, task.step, task.state, task.kind, outcomes, logString(evs))
			}
		}
		return recs
	}
	// step checks the record of step call of run r with input n: its
	// result is that of an execution of it, whose attempt it recorded,
	// and no execution had a later attempt. It returns the result.
	step := func(r *runRow, n int, task taskRow) string {
		call := strings.Split(task.step, "#")[0]
		var out string
		if err := json.Unmarshal(task.output, &out); err != nil {
			p.add("%s/%s: output %s: %v", r.id, task.step, task.output, err)
			return ""
		}
		st.recordedSteps++
		c, m, nonce, ok := workloads.ParseFuncStepResult(out)
		if !ok || c != call || m != n {
			p.add("%s/%s: result %q, want %s/%d/<nonce>", r.id, task.step, out, call, n)
			return out
		}
		xs := execsOf[callKey{r.id, call}]
		i := slices.IndexFunc(xs, func(x funcExec) bool { return x.nonce == nonce })
		switch {
		case i < 0:
			p.add("%s/%s: result %q of no execution (%d executions)", r.id, task.step, out, len(xs))
		case xs[i].attempt != task.attempt:
			p.add("%s/%s: result of an execution of attempt %d, recorded as attempt %d", r.id, task.step, xs[i].attempt, task.attempt)
		}
		for _, x := range xs {
			if x.attempt > task.attempt {
				p.add("%s/%s: an execution of attempt %d, after attempt %d recorded its result", r.id, task.step, x.attempt, task.attempt)
			}
		}
		extra := len(xs) - 1
		if call == "flaky" {
			if task.attempt < 2 {
				p.add("%s/%s: completed by attempt %d; its first attempt fails", r.id, task.step, task.attempt)
			}
			st.flakyFailures += task.attempt - 1
			extra -= task.attempt - 1
		}
		st.reexecutions += max(extra, 0)
		return out
	}
	// wait counts how a wait's record received what it waited for.
	wait := func(task taskRow) {
		evs := s.events[task.taskKey]
		i := slices.IndexFunc(evs, func(e eventRow) bool { return e.typ == "WAITING" })
		j := slices.IndexFunc(evs, func(e eventRow) bool { return e.typ == "COMPLETED" })
		if i >= 0 && j > i && evs[j].at.After(evs[i].at) {
			st.receivedWaiting++
		} else {
			st.receivedAtOnce++
		}
	}
	names := func(recs []taskRow) []string {
		var ns []string
		for _, r := range recs {
			ns = append(ns, r.step)
		}
		return ns
	}

	childOf := map[string]*runRow{}
	for _, c := range children {
		st.children++
		switch {
		case byID[c.parent] == nil || byID[c.parent].workflow != workloads.Func:
			p.add("child run %s (%s) of run %s, which is not a %s run", c.id, c.workflow, c.parent, workloads.Func)
		case c.workflow != workloads.FuncChild || dag.DisplayName(c.parentStep) != "sub#8":
			p.add("child run %s is of %s, started by %s, want %s, started by sub#8", c.id, c.workflow, c.parentStep, workloads.FuncChild)
		case childOf[c.parent] != nil:
			p.add("run %s has two child runs, %s and %s", c.parent, childOf[c.parent].id, c.id)
		default:
			childOf[c.parent] = c
		}
	}
	for _, r := range s.runs {
		if r.parent != "" {
			continue
		}
		st.runs++
		if r.workflow != workloads.Func || r.status != "COMPLETED" {
			p.add("run %s (%s) is %s", r.id, r.workflow, r.status)
			continue
		}
		var in workloads.FuncInput
		if err := json.Unmarshal(r.input, &in); err != nil {
			p.add("run %s: input %s: %v", r.id, r.input, err)
			continue
		}
		n := in.N
		recs := records(&r)
		if got := names(recs); !slices.Equal(got, workloads.FuncCalls) {
			p.add("run %s: records %v, want %v", r.id, got, workloads.FuncCalls)
			continue
		}
		want := workloads.FuncOutput{Parts: []string{}}
		want.Prepare = step(&r, n, recs[0])
		want.Flaky = step(&r, n, recs[1])
		want.Ledger = step(&r, n, recs[2])
		for k := range workloads.FuncParts {
			want.Parts = append(want.Parts, step(&r, n, recs[4+k]))
		}
		want.Finish = step(&r, n, recs[11])
		wait(recs[9])
		wait(recs[10])
		want.Paid, want.Approved = funcPayment(n), funcApproval(n)
		for _, k := range []int{9, 10} {
			var got string
			if err := json.Unmarshal(recs[k].output, &got); err != nil || (k == 9 && got != want.Paid) || (k == 10 && got != want.Approved) {
				p.add("%s/%s: received %s (%v)", r.id, recs[k].step, recs[k].output, err)
			}
		}

		// The child run, and its output as sub's result.
		c := childOf[r.id]
		if c == nil {
			p.add("run %s: no child run", r.id)
			continue
		}
		if recs[8].child != c.id {
			p.add("run %s: sub#8 names the child run %s, not %s", r.id, recs[8].child, c.id)
		}
		if c.status != "COMPLETED" {
			p.add("child run %s of run %s is %s", c.id, r.id, c.status)
			continue
		}
		crecs := records(c)
		if got := names(crecs); !slices.Equal(got, workloads.FuncChildCalls) {
			p.add("child run %s: records %v, want %v", c.id, got, workloads.FuncChildCalls)
			continue
		}
		want.Child = step(c, n, crecs[0]) + "+" + step(c, n, crecs[2])
		var sub string
		if err := json.Unmarshal(recs[8].output, &sub); err != nil || sub != want.Child {
			p.add("run %s: sub#8's result %s, want the child run's output %q (%v)", r.id, recs[8].output, want.Child, err)
		}

		// The function's output: each call's recorded result.
		var got workloads.FuncOutput
		if err := json.Unmarshal(s.tasks[taskKey{r.id, "main"}].output, &got); err != nil {
			p.add("run %s: output %s: %v", r.id, s.tasks[taskKey{r.id, "main"}].output, err)
		} else if fmt.Sprint(got) != fmt.Sprint(want) {
			p.add("run %s: output %+v, want the records' %+v", r.id, got, want)
		}

		// The transactional row: one, of the recorded execution.
		rows := effectsOf[r.id]
		_, _, nonce, _ := workloads.ParseFuncStepResult(want.Ledger)
		switch {
		case len(rows) != 1:
			p.add("run %s: %d rows of ledger, want 1: %v", r.id, len(rows), rows)
		case rows[0].nonce != nonce || rows[0].call != "ledger":
			p.add("run %s: the row of ledger is %+v, want that of the execution recorded (%s)", r.id, rows[0], nonce)
		}
	}
	if st.runs != wantRuns || st.children != wantRuns {
		p.add("%d runs and %d child runs, want %d of each", st.runs, st.children, wantRuns)
	}
	for run := range effectsOf {
		if r := byID[run]; r == nil || r.parent != "" {
			p.add("a row of ledger for %s, which is no crash-fn run", run)
		}
	}
	return st, p
}

// seqOf returns the number of a record named "name#seq" (-1 for none).
func seqOf(name string) int {
	_, seq, ok := strings.Cut(name, "#")
	if !ok {
		return -1
	}
	var n int
	if _, err := fmt.Sscanf(seq, "%d", &n); err != nil {
		return -1
	}
	return n
}

// countEvents counts the events of type typ in evs.
func countEvents(evs []eventRow, typ string) (n int) {
	for _, e := range evs {
		if e.typ == typ {
			n++
		}
	}
	return n
}
