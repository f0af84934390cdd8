package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
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
	var p problems
	st := recordedStats{runs: len(s.runs), tasks: len(s.tasks)}
	if len(s.runs) < wantRuns {
		p.add("%d runs in the store, want %d", len(s.runs), wantRuns)
	}
	for _, r := range s.runs {
		if r.status != "COMPLETED" {
			p.add("run %s (%s) is %s", r.id, r.workflow, r.status)
		}
	}
	for k, task := range s.tasks {
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
	for k := range s.events {
		if _, ok := s.tasks[k]; !ok {
			p.add("events of %s/%s, which is no task", k.run, k.step)
		}
	}
	p.require(t, "recorded state is wrong")
	return st
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
	reexecutions  int // executions beyond one per recorded attempt
}

// verifyChaos checks the chaos runs' outputs against their inputs, and the
// executions the workers recorded against what the store recorded: the
// attempt that completed a step was executed, a skipped branch never was.
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
	byAttempt := map[attemptKey]int{}
	byTask := map[taskKey]int{}
	for _, k := range execs {
		byAttempt[k]++
		byTask[taskKey{k.run, k.step}]++
	}
	st := executionStats{executions: len(execs)}

	var p problems
	steps := []string{"start", "even", "odd", "flaky", "work-0", "work-1", "work-2", "work-3", "nap", "join"}
	for _, r := range s.runs {
		if r.workflow != workloads.Chaos {
			continue
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
			other:    "",
			"flaky":  fmt.Sprintf(`"flaky/%d"`, in.N),
			"nap":    "",
			"join":   fmt.Sprintf(`"%s/%d"`, taken, in.N),
			"work-0": fmt.Sprintf(`"work-0/%d"`, in.N),
			"work-1": fmt.Sprintf(`"work-1/%d"`, in.N),
			"work-2": fmt.Sprintf(`"work-2/%d"`, in.N),
			"work-3": fmt.Sprintf(`"work-3/%d"`, in.N),
		}
		for _, step := range steps {
			k := taskKey{r.id, step}
			task, ok := s.tasks[k]
			switch {
			case !ok:
				p.add("run %s: no task %s", r.id, step)
			case step == other:
				if task.state != "SKIPPED" {
					p.add("run %s (n=%d): %s is %s, want SKIPPED", r.id, in.N, step, task.state)
				}
				if byTask[k] > 0 {
					p.add("run %s: skipped branch %s was executed %d times", r.id, step, byTask[k])
				}
			case task.state != "COMPLETED":
				p.add("run %s: %s is %s", r.id, step, task.state)
			case step == "nap":
			default:
				st.recordedSteps++
				if got := compactJSON(task.output); got != want[step] {
					p.add("run %s: %s output %s, want %s", r.id, step, got, want[step])
				}
				if byAttempt[attemptKey{r.id, step, task.attempt}] == 0 {
					p.add("run %s: %s was recorded by attempt %d, which never executed", r.id, step, task.attempt)
				}
				if step == "flaky" && (task.attempt < 2 || byAttempt[attemptKey{r.id, step, 1}] == 0) {
					p.add("run %s: flaky completed by attempt %d without its failing first attempt", r.id, task.attempt)
				}
				st.reexecutions += byTask[k] - 1
				if step == "flaky" {
					st.reexecutions-- // its first attempt fails by design
				}
			}
		}
	}
	p.require(t, "chaos runs are wrong")
	return st
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
