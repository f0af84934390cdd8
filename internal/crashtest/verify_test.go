package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/workloads"
)

// taskKey names one task of one run.
type taskKey struct {
	run  string
	step string
}

type runRow struct {
	id, workflow, status string
	input                []byte
}

type taskRow struct {
	taskKey
	kind, state string
	attempt     int
	output      []byte
}

type eventRow struct {
	taskKey
	typ     string
	attempt int
	at      time.Time
	due     time.Time // of SLEEPING and RETRYING events
	detail  string
}

// snapshot is everything the store says about a test's runs, read after
// they settled: the runs' inputs from the runs table, and their states,
// outputs and event logs through the engine's public API (Get, Events), as a
// user would see them.
type snapshot struct {
	runs   []runRow
	tasks  map[taskKey]taskRow
	events map[taskKey][]eventRow // in log order
}

func (h *harness) snapshot() *snapshot {
	t := h.t
	t.Helper()
	ctx := context.Background()
	s := &snapshot{tasks: map[taskKey]taskRow{}, events: map[taskKey][]eventRow{}}

	rows, err := h.pool.Query(ctx, `SELECT id::text, workflow, input FROM `+h.table("runs")+` ORDER BY id`)
	require.NoError(t, err)
	s.runs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (runRow, error) {
		var r runRow
		err := row.Scan(&r.id, &r.workflow, &r.input)
		return r, err
	})
	require.NoError(t, err)
	for i := range s.runs {
		r := &s.runs[i]
		id := uuid.MustParse(r.id)
		res, err := h.client.Get(ctx, id)
		require.NoError(t, err)
		r.status = string(res.Status)
		for _, st := range res.Steps {
			k := taskKey{r.id, st.Name}
			s.tasks[k] = taskRow{taskKey: k, kind: string(st.Kind), state: string(st.State), attempt: st.Attempts, output: st.Output}
		}
		evs, err := h.client.Events(ctx, id)
		require.NoError(t, err)
		for _, ev := range evs {
			k := taskKey{r.id, ev.Step}
			s.events[k] = append(s.events[k], eventRow{taskKey: k, typ: string(ev.Type), attempt: ev.Attempt,
				at: ev.At, due: ev.DueAt, detail: ev.Detail})
		}
	}
	return s
}

// problems collects what verification found wrong, to report it all at once.
type problems struct {
	list  []string
	total int
}

func (p *problems) add(format string, a ...any) {
	p.total++
	if len(p.list) < 40 {
		p.list = append(p.list, fmt.Sprintf(format, a...))
	}
}

func (p *problems) require(t *testing.T, what string) {
	t.Helper()
	if p.total > 0 {
		require.Failf(t, what, "%d problems, the first ones:\n%s", p.total, strings.Join(p.list, "\n"))
	}
}

// recordedStats are figures of the common verification.
type recordedStats struct {
	runs       int
	tasks      int
	outcomes   int // COMPLETED, WOKEN and SKIPPED events
	duplicates int // tasks with more than one of them
}

// verifyRecorded checks what every test promises: every run COMPLETED, and
// every task's event log is a valid sequence of transitions ending in
// exactly one recorded outcome (COMPLETED, WOKEN or SKIPPED), consistent with
// the task's final state, with the output of a completed step stored.
func verifyRecorded(t *testing.T, s *snapshot, wantRuns int) recordedStats {
	t.Helper()
	st, p := checkRecorded(s, wantRuns)
	p.require(t, "recorded state is wrong")
	return st
}

// checkRecorded is verifyRecorded on its own: what it finds wrong in s.
func checkRecorded(s *snapshot, wantRuns int) (recordedStats, *problems) {
	p := &problems{}
	st := recordedStats{runs: len(s.runs), tasks: len(s.tasks)}
	if len(s.runs) < wantRuns {
		p.add("%d runs in the store, want %d", len(s.runs), wantRuns)
	}
	for _, r := range s.runs {
		if r.status != "COMPLETED" {
			p.add("run %s (%s) is %s", r.id, r.workflow, r.status)
		}
	}
	for _, k := range sortedKeys(s.tasks) {
		task := s.tasks[k]
		outcomes, final, err := replay(s.events[k])
		st.outcomes += outcomes
		switch {
		case err != nil:
			p.add("%s/%s: %v; log: %s", k.run, k.step, err, logString(s.events[k]))
		case outcomes != 1:
			st.duplicates++
			p.add("%s/%s: %d recorded outcomes, want 1; log: %s", k.run, k.step, outcomes, logString(s.events[k]))
		case final != task.state:
			p.add("%s/%s: the log ends in %s, the task is %s", k.run, k.step, final, task.state)
		case task.state == "COMPLETED" && task.kind == "step" && task.output == nil:
			p.add("%s/%s: completed without an output", k.run, k.step)
		}
	}
	for _, k := range sortedKeys(s.events) {
		if _, ok := s.tasks[k]; !ok {
			p.add("events of %s/%s, which is no task", k.run, k.step)
		}
	}
	return st, p
}

// sortedKeys returns m's keys in order, so that problems are reported in a
// stable order.
func sortedKeys[V any](m map[taskKey]V) []taskKey {
	keys := make([]taskKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b taskKey) int {
		if c := strings.Compare(a.run, b.run); c != 0 {
			return c
		}
		return strings.Compare(a.step, b.step)
	})
	return keys
}

// replay checks that a task's events are a valid sequence of transitions
// (no event duplicated, none out of order), and returns how many of them
// recorded an outcome and the state they leave the task in.
func replay(evs []eventRow) (outcomes int, state string, err error) {
	state, attempt := "PENDING", 0
	backoff := false // QUEUED while waiting out a retry backoff
	for i, ev := range evs {
		bad := func(why string) error {
			return fmt.Errorf("event %d (%s attempt %d) %s in state %s attempt %d", i, ev.typ, ev.attempt, why, state, attempt)
		}
		switch ev.typ {
		case "QUEUED":
			switch {
			case state == "PENDING" || (state == "QUEUED" && backoff):
			case state == "RUNNING" && ev.detail == "released by its worker":
				attempt--
			default:
				return 0, "", bad("unexpected")
			}
			state, backoff = "QUEUED", false
		case "STARTED":
			if state != "QUEUED" || backoff {
				return 0, "", bad("unexpected")
			}
			attempt++
			state = "RUNNING"
		case "COMPLETED":
			if state != "RUNNING" {
				return 0, "", bad("unexpected")
			}
			state = "COMPLETED"
			outcomes++
		case "SKIPPED":
			if state != "RUNNING" && state != "PENDING" {
				return 0, "", bad("unexpected")
			}
			state = "SKIPPED"
			outcomes++
		case "RETRYING":
			if state != "RUNNING" {
				return 0, "", bad("unexpected")
			}
			state, backoff = "QUEUED", true
		case "SLEEPING":
			if state != "PENDING" {
				return 0, "", bad("unexpected")
			}
			state = "SLEEPING"
		case "WOKEN":
			if state != "SLEEPING" {
				return 0, "", bad("unexpected")
			}
			state = "COMPLETED"
			outcomes++
		case "FAILED":
			if state != "RUNNING" {
				return 0, "", bad("unexpected")
			}
			state = "FAILED"
		case "CANCELLED":
			if state == "COMPLETED" || state == "SKIPPED" || state == "FAILED" || state == "CANCELLED" {
				return 0, "", bad("unexpected")
			}
			state = "CANCELLED"
		default:
			return 0, "", bad("unknown")
		}
		if ev.attempt != attempt {
			return 0, "", bad("has the wrong attempt")
		}
	}
	return outcomes, state, nil
}

func logString(evs []eventRow) string {
	parts := make([]string, len(evs))
	for i, ev := range evs {
		parts[i] = fmt.Sprintf("%s#%d", ev.typ, ev.attempt)
	}
	return strings.Join(parts, " ")
}

// executionStats are figures of the chaos verification.
type executionStats struct {
	executions    int // rows in chaos_executions
	recordedSteps int // completed non-sleep steps
	reexecutions  int // executions beyond the recorded step outputs and flaky's designed failures
}

// verifyChaos checks the chaos runs' outputs against their inputs, and the
// executions the workers recorded in chaos_executions against what the store
// recorded (see checkChaos).
func verifyChaos(t *testing.T, h *harness, s *snapshot) executionStats {
	t.Helper()
	rows, err := h.pool.Query(context.Background(),
		`SELECT run_id::text, step, attempt FROM `+h.table("chaos_executions"))
	require.NoError(t, err)
	execs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (attemptKey, error) {
		var k attemptKey
		err := row.Scan(&k.run, &k.step, &k.attempt)
		return k, err
	})
	require.NoError(t, err)
	st, p := checkChaos(s, execs)
	p.require(t, "chaos runs are wrong")
	return st
}

// chaosSteps are the chaos workflow's tasks.
var chaosSteps = []string{"start", "even", "odd", "flaky", "work-0", "work-1", "work-2", "work-3", "nap", "join"}

// checkChaos is verifyChaos on its own, over the snapshot s (whose event
// logs verifyRecorded has checked) and the rows of chaos_executions: what it
// finds wrong.
//
// An execution row is written by the step's code, in a transaction of its
// own, before it works; the engine's STARTED event is written when the
// attempt is claimed, before the code runs. Executions are at least once: a
// worker killed mid-step leaves an attempt STARTED and RUNNING, which is
// rescued (RETRYING "no heartbeat") and run again as the next attempt, and a
// worker that drains gives its running attempts back ("released by its
// worker"), which runs the same attempt number again. Whether such an
// attempt wrote its row depends on when the worker died, so an attempt that
// did not complete may have no row at all; the flaky step's first attempt
// included, which then never got to fail by design.
//
// What is checked, for every executed chaos step:
//   - its output, against the run's input;
//   - no attempt number executed more times than the log shows it STARTED
//     (two rows for one claim of an attempt are a double execution, and a row
//     for an attempt never started an execution the engine did not know of);
//   - the attempt that completed the step executed;
//   - an attempt that failed with the flaky step's error executed, and was
//     the flaky step's first;
//   - flaky completed by attempt 2 or later;
//
// and that the skipped branch and the sleep never executed, and that every
// row is of a chaos task.
func checkChaos(s *snapshot, execs []attemptKey) (executionStats, *problems) {
	p := &problems{}
	byTask := map[taskKey]map[int]int{} // executions per task and attempt
	for _, k := range execs {
		tk := taskKey{k.run, k.step}
		if byTask[tk] == nil {
			byTask[tk] = map[int]int{}
		}
		byTask[tk][k.attempt]++
	}
	executions := func(k taskKey) (n int) {
		for _, c := range byTask[k] {
			n += c
		}
		return n
	}
	st := executionStats{executions: len(execs)}
	chaosTasks := map[taskKey]bool{}

	for _, r := range s.runs {
		if r.workflow != workloads.Chaos {
			continue
		}
		for _, step := range chaosSteps {
			chaosTasks[taskKey{r.id, step}] = true
		}
		var in workloads.ChaosInput
		if err := json.Unmarshal(r.input, &in); err != nil {
			p.add("run %s: input %q: %v", r.id, r.input, err)
			continue
		}
		taken, other := "even", "odd"
		if in.N%2 == 1 {
			taken, other = "odd", "even"
		}
		want := map[string]string{
			"start":  fmt.Sprintf(`{"odd":%v}`, in.N%2 == 1),
			taken:    fmt.Sprintf(`"%s/%d"`, taken, in.N),
			"flaky":  fmt.Sprintf(`"flaky/%d"`, in.N),
			"join":   fmt.Sprintf(`"%s/%d"`, taken, in.N),
			"work-0": fmt.Sprintf(`"work-0/%d"`, in.N),
			"work-1": fmt.Sprintf(`"work-1/%d"`, in.N),
			"work-2": fmt.Sprintf(`"work-2/%d"`, in.N),
			"work-3": fmt.Sprintf(`"work-3/%d"`, in.N),
		}
		for _, step := range chaosSteps {
			k := taskKey{r.id, step}
			task, ok := s.tasks[k]
			switch {
			case !ok:
				p.add("run %s: no task %s", r.id, step)
			case step == other:
				if task.state != "SKIPPED" {
					p.add("run %s (n=%d): %s is %s, want SKIPPED", r.id, in.N, step, task.state)
				}
				if n := executions(k); n > 0 {
					p.add("run %s: skipped branch %s was executed %d times", r.id, step, n)
				}
			case task.state != "COMPLETED":
				p.add("run %s: %s is %s", r.id, step, task.state)
			case step == "nap":
				if n := executions(k); n > 0 {
					p.add("run %s: the sleep nap was executed %d times", r.id, n)
				}
			default:
				st.recordedSteps++
				if got := compactJSON(task.output); got != want[step] {
					p.add("run %s: %s output %s, want %s", r.id, step, got, want[step])
				}
				designed := checkAttempts(p, k, task, s.events[k], byTask[k])
				st.reexecutions += executions(k) - 1 - designed
			}
		}
	}
	for _, k := range sortedKeys(byTask) {
		if !chaosTasks[k] {
			p.add("%d executions of %s/%s, which is no chaos task", executions(k), k.run, k.step)
		}
	}
	return st, p
}

// checkAttempts checks the executions of a completed chaos step, per
// attempt, against its event log (see checkChaos), and returns how many of
// its attempts failed by design (the flaky step's first).
func checkAttempts(p *problems, k taskKey, task taskRow, evs []eventRow, execs map[int]int) (designed int) {
	started := map[int]int{} // claims per attempt number
	for _, ev := range evs {
		switch ev.typ {
		case "STARTED":
			started[ev.attempt]++
		case "RETRYING", "FAILED":
			if !strings.Contains(ev.detail, workloads.ErrFlaky.Error()) {
				continue // a rescue, or an error before or instead of the row
			}
			designed++
			if k.step != "flaky" || ev.attempt != 1 {
				p.add("run %s: %s attempt %d failed with the flaky step's first-attempt error", k.run, k.step, ev.attempt)
			}
			if execs[ev.attempt] == 0 {
				p.add("run %s: %s attempt %d failed in the step's code, which it never executed; log: %s",
					k.run, k.step, ev.attempt, logString(evs))
			}
		}
	}
	for _, a := range slices.Sorted(maps.Keys(execs)) {
		if n := execs[a]; n > started[a] {
			p.add("run %s: %s attempt %d executed %d times, started %d times; log: %s",
				k.run, k.step, a, n, started[a], logString(evs))
		}
	}
	if execs[task.attempt] == 0 {
		p.add("run %s: %s was recorded by attempt %d, which never executed; log: %s",
			k.run, k.step, task.attempt, logString(evs))
	}
	if k.step == "flaky" && task.attempt < 2 {
		p.add("run %s: flaky completed by attempt %d, which always fails", k.run, task.attempt)
	}
	return designed
}

func compactJSON(b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// orphan is an attempt that was RUNNING on a worker when it was killed.
type orphan struct {
	attemptKey
	worker   string
	killedAt time.Time
}

// recovery is how fast orphaned attempts ran again.
type recovery struct {
	times   []time.Duration // kill to the next STARTED, per rescued attempt
	raced   int             // outcome recorded by the dying worker after all
	missing []string        // rescued but never started again
	late    []string        // started again later than the bound
}

// measureRecovery finds, for every orphan, the rescue of its attempt and the
// next STARTED of its task.
func measureRecovery(s *snapshot, orphans []orphan, bound time.Duration) recovery {
	var rec recovery
	for _, o := range orphans {
		evs := s.events[taskKey{o.run, o.step}]
		i := slices.IndexFunc(evs, func(e eventRow) bool { return e.typ == "STARTED" && e.attempt == o.attempt })
		if i < 0 || i+1 >= len(evs) {
			rec.missing = append(rec.missing, fmt.Sprintf("%s/%s attempt %d: %s", o.run, o.step, o.attempt, logString(evs)))
			continue
		}
		next := evs[i+1]
		if next.typ != "RETRYING" || !strings.Contains(next.detail, "no heartbeat") {
			rec.raced++ // the dying worker's last outcome committed
			continue
		}
		j := slices.IndexFunc(evs[i+1:], func(e eventRow) bool { return e.typ == "STARTED" })
		if j < 0 {
			rec.missing = append(rec.missing, fmt.Sprintf("%s/%s attempt %d: %s", o.run, o.step, o.attempt, logString(evs)))
			continue
		}
		d := evs[i+1+j].at.Sub(o.killedAt)
		rec.times = append(rec.times, d)
		if d > bound {
			rec.late = append(rec.late, fmt.Sprintf("%s/%s attempt %d on %s: started again %s after the kill (rescued after %s)",
				o.run, o.step, o.attempt, o.worker, d.Round(time.Millisecond), next.at.Sub(o.killedAt).Round(time.Millisecond)))
		}
	}
	slices.Sort(rec.times)
	return rec
}

func (r recovery) percentile(p float64) time.Duration {
	if len(r.times) == 0 {
		return 0
	}
	return r.times[min(int(p*float64(len(r.times))), len(r.times)-1)]
}
