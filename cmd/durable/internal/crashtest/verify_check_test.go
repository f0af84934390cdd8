package crashtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/cmd/durable/internal/workloads"
)

// These tests check the verification itself, on synthetic snapshots and
// execution rows: they need neither processes nor a database, and run
// without DURABLE_CRASH_TESTS.

// Runs of the fixtures: a chaos run, and child runs of its step sub.
const (
	fixtureRun    = "00000000-0000-0000-0000-000000000001"
	fixtureChild  = "00000000-0000-0000-0000-000000000002"
	fixtureChild2 = "00000000-0000-0000-0000-000000000003"
)

// fixtureT0 is when the fixtures' events happen, unless they say otherwise.
var fixtureT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// ev is an event of a synthetic log.
func ev(typ string, attempt int, detail ...string) eventRow {
	return eventRow{typ: typ, attempt: attempt, detail: strings.Join(detail, ""), at: fixtureT0}
}

// later is e, d after fixtureT0.
func later(e eventRow, d time.Duration) eventRow {
	e.at = fixtureT0.Add(d)
	return e
}

// Details of the events the engine records.
var (
	rescued  = "worker w1 lost: no heartbeat for 3s"
	released = "released by its worker"
	flakyErr = workloads.ErrFlaky.Error()
)

// Typical logs.
var (
	completedFirst = []eventRow{ev("QUEUED", 0), ev("STARTED", 1), ev("COMPLETED", 1)}
	// The worker was killed during attempt 1, which was lost; it ran
	// again, as attempt 1 (a lost attempt is not counted), and completed.
	rescuedThenCompleted = []eventRow{ev("QUEUED", 0), ev("STARTED", 1), ev("LOST", 1, rescued),
		ev("QUEUED", 0), ev("STARTED", 1), ev("COMPLETED", 1)}
)

// waitedFirst is the log of a waiting step whose first attempt waited, for
// what detail says, and completed d later.
func waitedFirst(detail string, d time.Duration) []eventRow {
	return []eventRow{ev("QUEUED", 0), ev("STARTED", 1), ev("WAITING", 1, detail), later(ev("COMPLETED", 1), d)}
}

// chaosFixture is one chaos run, its child runs and their items as the
// store and chaos_executions would show them.
type chaosFixture struct {
	n     int
	s     *snapshot
	execs map[taskKey][]int // attempts executed, per task
}

// newChaosFixture is a chaos run for input n without any crash: every step
// and item executed and completed by its first attempt, but flaky, whose
// first attempt failed by design; its event was sent while approve waited;
// sub's first child run completed.
func newChaosFixture(n int) *chaosFixture {
	f := &chaosFixture{n: n, execs: map[taskKey][]int{},
		s: &snapshot{tasks: map[taskKey]taskRow{}, events: map[taskKey][]eventRow{}}}
	f.s.runs = []runRow{{id: fixtureRun, workflow: workloads.Chaos, tenant: chaosTenant(n), status: "COMPLETED", input: f.input()}}
	taken, other := f.branches()
	f.set("start", "COMPLETED", 1, fmt.Sprintf(`{"odd":%v}`, n%2 == 1), []int{1}, completedFirst...)
	f.set(taken, "COMPLETED", 1, fmt.Sprintf(`"%s/%d"`, taken, n), []int{1}, completedFirst...)
	f.set(other, "SKIPPED", 1, "", nil, ev("QUEUED", 0), ev("STARTED", 1), ev("SKIPPED", 1))
	f.set("flaky", "COMPLETED", 2, fmt.Sprintf(`"flaky/%d"`, n), []int{1, 2}, ev("QUEUED", 0), ev("STARTED", 1),
		ev("RETRYING", 1, flakyErr), ev("QUEUED", 1), ev("STARTED", 2), ev("COMPLETED", 2))
	for i := range 4 {
		step := fmt.Sprintf("work-%d", i)
		f.set(step, "COMPLETED", 1, fmt.Sprintf(`"%s/%d"`, step, n), []int{1}, completedFirst...)
	}
	f.set("nap", "COMPLETED", 0, "", nil, ev("SLEEPING", 0), ev("WOKEN", 0))
	f.set("approve", "COMPLETED", 1, fmt.Sprintf(`"approved-%d"`, n), nil, waitedFirst("event "+workloads.ChaosKey(n), time.Second)...)
	f.addChild(fixtureChild, "COMPLETED")
	f.set("sub", "COMPLETED", 1, fmt.Sprintf(`"child:a/%d"`, n), nil, waitedFirst("child run "+fixtureChild, 2*time.Second)...)
	f.set("lines", "COMPLETED", 1, fmt.Sprintf(`[%d,%d,%d,%d]`, 4*n, 4*n+1, 4*n+2, 4*n+3), []int{1}, completedFirst...)
	f.set("fan", "COMPLETED", 1, "", nil, waitedFirst("4 items", time.Second)...)
	for k := range workloads.ChaosItems {
		f.set(itemName("fan", k), "COMPLETED", 1, strconv.Itoa(2*(4*n+k)), []int{1}, completedFirst...)
	}
	f.set("join", "COMPLETED", 1, fmt.Sprintf(`"%s/%d/approved-%d/child:a/%d"`, taken, n, n, n), []int{1}, completedFirst...)
	return f
}

func (f *chaosFixture) input() []byte {
	in, _ := json.Marshal(workloads.ChaosInput{N: f.n})
	return in
}

func (f *chaosFixture) branches() (taken, other string) {
	if f.n%2 == 1 {
		return "odd", "even"
	}
	return "even", "odd"
}

// addChild adds a child run of sub with status status, its steps
// completed by their first attempt if it completed; a child that did not
// complete failed in a, and b was cancelled.
func (f *chaosFixture) addChild(id, status string) {
	f.s.runs = append(f.s.runs, runRow{id: id, workflow: workloads.ChaosChild, tenant: chaosTenant(f.n), status: status,
		input: f.input(), parent: fixtureRun, parentStep: "sub", parentResult: "b"})
	if status == "COMPLETED" {
		f.setIn(id, "a", "COMPLETED", 1, fmt.Sprintf(`"a/%d"`, f.n), []int{1}, completedFirst...)
		f.setIn(id, "b", "COMPLETED", 1, fmt.Sprintf(`"child:a/%d"`, f.n), []int{1}, completedFirst...)
		return
	}
	f.setIn(id, "a", "FAILED", 1, "", []int{1}, ev("QUEUED", 0), ev("STARTED", 1), ev("FAILED", 1, "boom"))
	f.setIn(id, "b", "CANCELLED", 0, "", nil, ev("CANCELLED", 0, `run failed: step "a" failed`))
}

// dropRun removes run id and its tasks.
func (f *chaosFixture) dropRun(id string) {
	f.s.runs = slices.DeleteFunc(f.s.runs, func(r runRow) bool { return r.id == id })
	for k := range f.s.tasks {
		if k.run == id {
			delete(f.s.tasks, k)
			delete(f.s.events, k)
			delete(f.execs, k)
		}
	}
}

// run returns the fixture's run id.
func (f *chaosFixture) run(id string) *runRow {
	for i := range f.s.runs {
		if f.s.runs[i].id == id {
			return &f.s.runs[i]
		}
	}
	panic("no run " + id)
}

// set replaces a step's (or an item's) task, event log and executions.
func (f *chaosFixture) set(step, state string, attempt int, output string, execs []int, evs ...eventRow) {
	f.setIn(fixtureRun, step, state, attempt, output, execs, evs...)
}

// setIn replaces the task of run, its event log and executions.
func (f *chaosFixture) setIn(run, step, state string, attempt int, output string, execs []int, evs ...eventRow) {
	k := taskKey{run, step}
	task := taskRow{taskKey: k, kind: "step", state: state, attempt: attempt}
	switch {
	case step == "nap":
		task.kind = "sleep"
	case step == "approve":
		task.kind, task.eventKey = "event", workloads.ChaosKey(f.n)
	case step == "sub":
		task.kind = "child"
		for _, e := range evs {
			if id, ok := strings.CutPrefix(e.detail, "child run "); ok && e.typ == "WAITING" {
				task.child = id
			}
		}
	case step == "fan":
		task.kind, task.items = "map", workloads.ChaosItems
	case strings.HasPrefix(step, "fan["):
		task.kind = "item"
	}
	if output != "" {
		task.output = []byte(output)
	}
	f.s.tasks[k] = task
	log := make([]eventRow, len(evs))
	for i, e := range evs {
		e.taskKey = k
		log[i] = e
	}
	f.s.events[k] = log
	f.execs[k] = execs
}

// update changes a task of the chaos run.
func (f *chaosFixture) update(step string, change func(t *taskRow)) {
	k := taskKey{fixtureRun, step}
	t := f.s.tasks[k]
	change(&t)
	f.s.tasks[k] = t
}

// rows are the fixture's chaos_executions rows.
func (f *chaosFixture) rows() []attemptKey {
	var rows []attemptKey
	for _, k := range sortedKeys(f.execs) {
		for _, a := range f.execs[k] {
			rows = append(rows, attemptKey{k.run, k.step, a})
		}
	}
	return rows
}

func (f *chaosFixture) check() (chaosStats, *problems) {
	return checkChaos(f.s, f.rows())
}

// requireRecordedOK checks that the fixture's logs are ones verifyRecorded
// accepts, so that the chaos verification is tested on realistic input.
func requireRecordedOK(t *testing.T, f *chaosFixture) {
	t.Helper()
	_, p := checkRecorded(f.s, 1)
	require.Zero(t, p.total, "the fixture's recorded state: %s", strings.Join(p.list, "\n"))
}

// cleanStats are the figures of a fixture without a crash.
var cleanStats = chaosStats{
	// start, the branch taken, flaky twice, work-0..3, lines, join, the 4
	// items, a and b.
	executions:    16,
	recordedSteps: 15,
	items:         4,
	childSteps:    2,
	children:      1,
	approvals:     1,
}

func TestCheckChaosClean(t *testing.T) {
	for _, n := range []int{6, 7} {
		f := newChaosFixture(n)
		requireRecordedOK(t, f)
		st, p := f.check()
		require.Zero(t, p.total, "n=%d: %s", n, strings.Join(p.list, "\n"))
		require.Equal(t, cleanStats, st)
	}
}

// subRetried is sub's log when its first child run failed and the second
// completed.
var subRetried = []eventRow{ev("QUEUED", 0), ev("STARTED", 1), ev("WAITING", 1, "child run "+fixtureChild),
	ev("RETRYING", 1, "child run "+fixtureChild+` failed: step "a" failed: boom`), ev("QUEUED", 1),
	ev("STARTED", 2), ev("WAITING", 2, "child run "+fixtureChild2), ev("COMPLETED", 2)}

// TestCheckChaosAtLeastOnce: attempts of killed and draining workers, with
// or without their side effect, are executions the engine is allowed; so
// are the executions of a child run that failed, which sub retried.
func TestCheckChaosAtLeastOnce(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(f *chaosFixture)
		want   func(st *chaosStats) // changes to cleanStats
	}{
		{
			// flaky's first attempt was STARTED and its worker died before
			// the attempt's row committed. The lost attempt is not counted:
			// attempt 1 runs again, fails by design, and attempt 2
			// completes.
			name: "flaky's first attempt started, killed before its side effect, rescued",
			mutate: func(f *chaosFixture) {
				f.set("flaky", "COMPLETED", 2, fmt.Sprintf(`"flaky/%d"`, f.n), []int{1, 2}, ev("QUEUED", 0),
					ev("STARTED", 1), ev("LOST", 1, rescued), ev("QUEUED", 0),
					ev("STARTED", 1), ev("RETRYING", 1, flakyErr), ev("QUEUED", 1),
					ev("STARTED", 2), ev("COMPLETED", 2))
			},
		},
		{
			name: "a step's attempt killed before its side effect, rescued",
			mutate: func(f *chaosFixture) {
				f.set("work-1", "COMPLETED", 1, fmt.Sprintf(`"work-1/%d"`, f.n), []int{1}, rescuedThenCompleted...)
			},
		},
		{
			name: "a step's attempt killed after its side effect, rescued",
			mutate: func(f *chaosFixture) {
				f.set("work-2", "COMPLETED", 1, fmt.Sprintf(`"work-2/%d"`, f.n), []int{1, 1}, rescuedThenCompleted...)
			},
			want: func(st *chaosStats) { st.executions, st.reexecutions = st.executions+1, 1 },
		},
		{
			name: "flaky killed twice: attempt 1 before its side effect, then after",
			mutate: func(f *chaosFixture) {
				f.set("flaky", "COMPLETED", 2, fmt.Sprintf(`"flaky/%d"`, f.n), []int{1, 1, 2}, ev("QUEUED", 0),
					ev("STARTED", 1), ev("LOST", 1, rescued), ev("QUEUED", 0),
					ev("STARTED", 1), ev("LOST", 1, rescued), ev("QUEUED", 0),
					ev("STARTED", 1), ev("RETRYING", 1, flakyErr), ev("QUEUED", 1),
					ev("STARTED", 2), ev("COMPLETED", 2))
			},
			want: func(st *chaosStats) { st.executions, st.reexecutions = st.executions+1, 1 },
		},
		{
			name: "flaky failed by design, then killed before its side effect",
			mutate: func(f *chaosFixture) {
				f.set("flaky", "COMPLETED", 2, fmt.Sprintf(`"flaky/%d"`, f.n), []int{1, 2}, ev("QUEUED", 0),
					ev("STARTED", 1), ev("RETRYING", 1, flakyErr), ev("QUEUED", 1),
					ev("STARTED", 2), ev("LOST", 2, rescued), ev("QUEUED", 1),
					ev("STARTED", 2), ev("COMPLETED", 2))
			},
		},
		{
			// A draining worker gives its attempt back: the same attempt
			// number runs again, and both claims executed.
			name: "an attempt released by a draining worker, run again",
			mutate: func(f *chaosFixture) {
				f.set("work-3", "COMPLETED", 1, fmt.Sprintf(`"work-3/%d"`, f.n), []int{1, 1}, ev("QUEUED", 0),
					ev("STARTED", 1), ev("QUEUED", 0, released), ev("STARTED", 1), ev("COMPLETED", 1))
			},
			want: func(st *chaosStats) { st.executions, st.reexecutions = st.executions+1, 1 },
		},
		{
			name: "the skipped branch killed while deciding, rescued",
			mutate: func(f *chaosFixture) {
				_, other := f.branches()
				f.set(other, "SKIPPED", 1, "", nil, ev("QUEUED", 0), ev("STARTED", 1), ev("LOST", 1, rescued),
					ev("QUEUED", 0), ev("STARTED", 1), ev("SKIPPED", 1))
			},
		},
		{
			name: "an item killed after its side effect, rescued",
			mutate: func(f *chaosFixture) {
				f.set("fan[2]", "COMPLETED", 1, strconv.Itoa(2*(4*f.n+2)), []int{1, 1}, rescuedThenCompleted...)
			},
			want: func(st *chaosStats) { st.executions, st.reexecutions = st.executions+1, 1 },
		},
		{
			name: "an item released by a draining worker, run again",
			mutate: func(f *chaosFixture) {
				f.set("fan[0]", "COMPLETED", 1, strconv.Itoa(8*f.n), []int{1, 1}, ev("QUEUED", 0),
					ev("STARTED", 1), ev("QUEUED", 0, released), ev("STARTED", 1), ev("COMPLETED", 1))
			},
			want: func(st *chaosStats) { st.executions, st.reexecutions = st.executions+1, 1 },
		},
		{
			name: "a child run's step killed before its side effect, rescued",
			mutate: func(f *chaosFixture) {
				f.setIn(fixtureChild, "a", "COMPLETED", 1, fmt.Sprintf(`"a/%d"`, f.n), []int{1}, rescuedThenCompleted...)
			},
		},
		{
			// The event was sent before approve waited: it received it as
			// it began waiting, in the same transition.
			name: "approve's event delivered by the lookback",
			mutate: func(f *chaosFixture) {
				f.set("approve", "COMPLETED", 1, fmt.Sprintf(`"approved-%d"`, f.n), nil,
					waitedFirst("event "+workloads.ChaosKey(f.n), 0)...)
			},
			want: func(st *chaosStats) { st.lookback = 1 },
		},
		{
			name: "approve killed while computing its key, rescued",
			mutate: func(f *chaosFixture) {
				f.set("approve", "COMPLETED", 1, fmt.Sprintf(`"approved-%d"`, f.n), nil, ev("QUEUED", 0),
					ev("STARTED", 1), ev("LOST", 1, rescued), ev("QUEUED", 0), ev("STARTED", 1),
					ev("WAITING", 1, "event "+workloads.ChaosKey(f.n)), later(ev("COMPLETED", 1), time.Second))
			},
		},
		{
			name: "sub killed before it started its child, rescued",
			mutate: func(f *chaosFixture) {
				f.set("sub", "COMPLETED", 1, fmt.Sprintf(`"child:a/%d"`, f.n), nil, ev("QUEUED", 0),
					ev("STARTED", 1), ev("LOST", 1, rescued), ev("QUEUED", 0), ev("STARTED", 1),
					ev("WAITING", 1, "child run "+fixtureChild), later(ev("COMPLETED", 1), time.Second))
			},
		},
		{
			name: "sub's first child run failed, the second completed",
			mutate: func(f *chaosFixture) {
				f.dropRun(fixtureChild)
				f.addChild(fixtureChild, "FAILED")
				f.addChild(fixtureChild2, "COMPLETED")
				f.set("sub", "COMPLETED", 2, fmt.Sprintf(`"child:a/%d"`, f.n), nil, subRetried...)
			},
			want: func(st *chaosStats) {
				st.executions++ // the failed child's a
				st.reexecutions, st.children, st.failedChildren = 1, 2, 1
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newChaosFixture(7)
			c.mutate(f)
			requireRecordedOK(t, f)
			st, p := f.check()
			require.Zero(t, p.total, "%s", strings.Join(p.list, "\n"))
			want := cleanStats
			if c.want != nil {
				c.want(&want)
			}
			require.Equal(t, want, st)
		})
	}
}

// TestCheckChaosCatches: what the engine must never do is reported.
func TestCheckChaosCatches(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(f *chaosFixture)
		want   string // in the problem reported
	}{
		{
			name: "a double execution of one started attempt",
			mutate: func(f *chaosFixture) {
				f.execs[taskKey{fixtureRun, "work-0"}] = []int{1, 1}
			},
			want: "work-0 attempt 1 executed 2 times, started 1 times",
		},
		{
			name: "a double execution of the attempt that completed after a rescue",
			mutate: func(f *chaosFixture) {
				f.set("work-1", "COMPLETED", 1, fmt.Sprintf(`"work-1/%d"`, f.n), []int{1, 1, 1}, rescuedThenCompleted...)
			},
			want: "work-1 attempt 1 executed 3 times, started 2 times",
		},
		{
			name: "an execution of an attempt the engine never started",
			mutate: func(f *chaosFixture) {
				f.execs[taskKey{fixtureRun, "work-2"}] = []int{1, 2}
			},
			want: "work-2 attempt 2 executed 1 times, started 0 times",
		},
		{
			name: "a completed attempt without its side effect",
			mutate: func(f *chaosFixture) {
				f.execs[taskKey{fixtureRun, "work-0"}] = nil
			},
			want: "work-0 was recorded by attempt 1, which never executed",
		},
		{
			name: "a completed attempt without its side effect, after a failed one with one",
			mutate: func(f *chaosFixture) {
				f.set("flaky", "COMPLETED", 2, fmt.Sprintf(`"flaky/%d"`, f.n), []int{1}, ev("QUEUED", 0),
					ev("STARTED", 1), ev("RETRYING", 1, flakyErr), ev("QUEUED", 1), ev("STARTED", 2), ev("COMPLETED", 2))
			},
			want: "flaky was recorded by attempt 2, which never executed",
		},
		{
			name: "flaky's failure by design without its side effect",
			mutate: func(f *chaosFixture) {
				f.execs[taskKey{fixtureRun, "flaky"}] = []int{2}
			},
			want: "flaky attempt 1 failed in the step's code, which it never executed",
		},
		{
			name: "flaky's failure by design on a later attempt",
			mutate: func(f *chaosFixture) {
				f.set("flaky", "COMPLETED", 3, fmt.Sprintf(`"flaky/%d"`, f.n), []int{1, 2, 3}, ev("QUEUED", 0),
					ev("STARTED", 1), ev("RETRYING", 1, flakyErr), ev("QUEUED", 1),
					ev("STARTED", 2), ev("RETRYING", 2, flakyErr), ev("QUEUED", 2),
					ev("STARTED", 3), ev("COMPLETED", 3))
			},
			want: "flaky attempt 2 failed with the flaky step's first-attempt error",
		},
		{
			name: "flaky completed by its first attempt",
			mutate: func(f *chaosFixture) {
				f.set("flaky", "COMPLETED", 1, fmt.Sprintf(`"flaky/%d"`, f.n), []int{1}, completedFirst...)
			},
			want: "flaky completed by attempt 1",
		},
		{
			name: "the skipped branch executed",
			mutate: func(f *chaosFixture) {
				_, other := f.branches()
				f.execs[taskKey{fixtureRun, other}] = []int{1}
			},
			want: "skipped branch even was executed 1 times",
		},
		{
			name: "the sleep executed",
			mutate: func(f *chaosFixture) {
				f.execs[taskKey{fixtureRun, "nap"}] = []int{0}
			},
			want: "the sleep nap was executed 1 times",
		},
		{
			name: "a wrong output",
			mutate: func(f *chaosFixture) {
				f.set("work-3", "COMPLETED", 1, `"work-3/8"`, []int{1}, completedFirst...)
			},
			want: `work-3 output "work-3/8", want "work-3/7"`,
		},
		{
			name: "a wrong output of join",
			mutate: func(f *chaosFixture) {
				f.set("join", "COMPLETED", 1, `"odd/7"`, []int{1}, completedFirst...)
			},
			want: `join output "odd/7", want "odd/7/approved-7/child:a/7"`,
		},
		// Items.
		{
			name: "an item executed twice by one started attempt",
			mutate: func(f *chaosFixture) {
				f.execs[taskKey{fixtureRun, "fan[1]"}] = []int{1, 1}
			},
			want: "fan[1] attempt 1 executed 2 times, started 1 times",
		},
		{
			name: "an item completed without its side effect",
			mutate: func(f *chaosFixture) {
				f.execs[taskKey{fixtureRun, "fan[2]"}] = nil
			},
			want: "fan[2] was recorded by attempt 1, which never executed",
		},
		{
			name: "an item's wrong output",
			mutate: func(f *chaosFixture) {
				f.set("fan[0]", "COMPLETED", 1, "6", []int{1}, completedFirst...)
			},
			want: "fan[0] output 6, want 56",
		},
		{
			name: "a map step with an item missing",
			mutate: func(f *chaosFixture) {
				f.update("fan", func(t *taskRow) { t.items = 3 })
				delete(f.s.tasks, taskKey{fixtureRun, "fan[3]"})
				delete(f.s.events, taskKey{fixtureRun, "fan[3]"})
				delete(f.execs, taskKey{fixtureRun, "fan[3]"})
			},
			want: "fan has 3 items, want 4",
		},
		{
			name: "an execution of an item the map step does not have",
			mutate: func(f *chaosFixture) {
				f.execs[taskKey{fixtureRun, "fan[4]"}] = []int{1}
			},
			want: "1 executions of " + fixtureRun + "/fan[4], which is no chaos task",
		},
		{
			name: "the map step executed",
			mutate: func(f *chaosFixture) {
				f.execs[taskKey{fixtureRun, "fan"}] = []int{1}
			},
			want: "the map step fan was executed 1 times",
		},
		// The event.
		{
			name: "approve received the second event sent for its key",
			mutate: func(f *chaosFixture) {
				f.set("approve", "COMPLETED", 1, fmt.Sprintf(`"again-%d"`, f.n), nil,
					waitedFirst("event "+workloads.ChaosKey(f.n), time.Second)...)
			},
			want: `approve output "again-7", want "approved-7"`,
		},
		{
			name: "approve waited for another key",
			mutate: func(f *chaosFixture) {
				f.update("approve", func(t *taskRow) { t.eventKey = workloads.ChaosKey(8) })
			},
			want: `approve waited for the event "chaos-8", want "chaos-7"`,
		},
		{
			name: "the event wait executed",
			mutate: func(f *chaosFixture) {
				f.execs[taskKey{fixtureRun, "approve"}] = []int{1}
			},
			want: "the event wait approve was executed 1 times",
		},
		// Child runs.
		{
			name: "two completed child runs",
			mutate: func(f *chaosFixture) {
				f.addChild(fixtureChild2, "COMPLETED")
				f.set("sub", "COMPLETED", 2, fmt.Sprintf(`"child:a/%d"`, f.n), nil, subRetried...)
			},
			want: "2 of its 2 child runs completed, want 1",
		},
		{
			name: "a child run that completed and is not sub's last",
			mutate: func(f *chaosFixture) {
				f.dropRun(fixtureChild)
				f.addChild(fixtureChild, "COMPLETED")
				f.addChild(fixtureChild2, "FAILED")
				f.set("sub", "COMPLETED", 2, fmt.Sprintf(`"child:a/%d"`, f.n), nil, subRetried...)
			},
			want: "child run " + fixtureChild + " completed, but sub's last child is " + fixtureChild2,
		},
		{
			name: "a failed child run for which sub did not fail an attempt",
			mutate: func(f *chaosFixture) {
				f.dropRun(fixtureChild)
				f.addChild(fixtureChild, "FAILED")
				f.addChild(fixtureChild2, "COMPLETED")
				log := slices.Clone(subRetried)
				log[3].detail = "the attempt timed out"
				f.set("sub", "COMPLETED", 2, fmt.Sprintf(`"child:a/%d"`, f.n), nil, log...)
			},
			want: "child run " + fixtureChild + " is FAILED, but no attempt of sub failed for it",
		},
		{
			name: "a child run no attempt of sub started",
			mutate: func(f *chaosFixture) {
				f.addChild(fixtureChild2, "FAILED")
			},
			want: "child run " + fixtureChild2 + " was started by no attempt of sub",
		},
		{
			name: "sub waited for a child run that is not in the store",
			mutate: func(f *chaosFixture) {
				f.dropRun(fixtureChild)
			},
			want: "sub waited for child run " + fixtureChild + ", which is not its child in the store",
		},
		{
			name: "a child run started by another step",
			mutate: func(f *chaosFixture) {
				f.run(fixtureChild).parentStep = "other"
			},
			want: "started by step other with result b",
		},
		{
			name: "a child run with another input",
			mutate: func(f *chaosFixture) {
				f.run(fixtureChild).input = []byte(`{"n":8}`)
			},
			want: `has tenant tenant-2 and input {"n":8}, want tenant-2 and {"n":7}`,
		},
		{
			name: "sub's output is not its child's result",
			mutate: func(f *chaosFixture) {
				f.setIn(fixtureChild, "b", "COMPLETED", 1, `"child:a/8"`, []int{1}, completedFirst...)
			},
			want: `sub output "child:a/7" is not its child ` + fixtureChild + `'s result "child:a/8"`,
		},
		{
			name: "a child run's step executed twice by one started attempt",
			mutate: func(f *chaosFixture) {
				f.execs[taskKey{fixtureChild, "a"}] = []int{1, 1}
			},
			want: "run " + fixtureChild + ": a attempt 1 executed 2 times, started 1 times",
		},
		{
			name: "a failed child run's step executed twice by one started attempt",
			mutate: func(f *chaosFixture) {
				f.dropRun(fixtureChild)
				f.addChild(fixtureChild, "FAILED")
				f.addChild(fixtureChild2, "COMPLETED")
				f.set("sub", "COMPLETED", 2, fmt.Sprintf(`"child:a/%d"`, f.n), nil, subRetried...)
				f.execs[taskKey{fixtureChild, "a"}] = []int{1, 1}
			},
			want: "run " + fixtureChild + ": a attempt 1 executed 2 times, started 1 times",
		},
		{
			name: "the child step executed",
			mutate: func(f *chaosFixture) {
				f.execs[taskKey{fixtureRun, "sub"}] = []int{1}
			},
			want: "the child step sub was executed 1 times",
		},
		{
			name: "a chaos-child run of no chaos run",
			mutate: func(f *chaosFixture) {
				f.run(fixtureRun).workflow = "other"
			},
			want: "chaos-child run " + fixtureChild + " is no chaos run's child",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newChaosFixture(7)
			c.mutate(f)
			requireRecordedOK(t, f)
			_, p := f.check()
			require.NotZero(t, p.total, "not caught")
			require.Contains(t, strings.Join(p.list, "\n"), c.want)
		})
	}
}

// TestCheckRecordedCatches: an outcome recorded twice, an attempt executed
// without a STARTED event, a waiting step rescued or completed without
// waiting, is not a valid log; a run that did not complete, a child run
// that did not settle, a map step completed without its items, are caught
// too.
func TestCheckRecordedCatches(t *testing.T) {
	cases := []struct {
		name   string
		step   string // whose log is replaced by log
		log    []eventRow
		mutate func(f *chaosFixture) // instead of a log
		want   string
	}{
		{
			name: "an output recorded twice",
			step: "work-0",
			log:  []eventRow{ev("QUEUED", 0), ev("STARTED", 1), ev("COMPLETED", 1), ev("COMPLETED", 1)},
			want: "event 3 (COMPLETED attempt 1) unexpected in state COMPLETED",
		},
		{
			name: "a rescued attempt completed after all, and its next attempt too",
			step: "work-0",
			log: []eventRow{ev("QUEUED", 0), ev("STARTED", 1), ev("LOST", 1, rescued), ev("COMPLETED", 1),
				ev("QUEUED", 0), ev("STARTED", 1), ev("COMPLETED", 1)},
			want: "event 3 (COMPLETED attempt 1) unexpected in state LOST",
		},
		{
			name: "an item's output recorded twice",
			step: "fan[1]",
			log:  []eventRow{ev("QUEUED", 0), ev("STARTED", 1), ev("COMPLETED", 1), ev("COMPLETED", 1)},
			want: "fan[1]: event 3 (COMPLETED attempt 1) unexpected in state COMPLETED",
		},
		{
			name: "a rescued item completed after all, and its next attempt too",
			step: "fan[3]",
			log: []eventRow{ev("QUEUED", 0), ev("STARTED", 1), ev("LOST", 1, rescued), ev("COMPLETED", 1),
				ev("QUEUED", 0), ev("STARTED", 1), ev("COMPLETED", 1)},
			want: "fan[3]: event 3 (COMPLETED attempt 1) unexpected in state LOST",
		},
		{
			name: "an event received twice",
			step: "approve",
			log: []eventRow{ev("QUEUED", 0), ev("STARTED", 1), ev("WAITING", 1, "event chaos-7"), ev("COMPLETED", 1),
				ev("COMPLETED", 1)},
			want: "approve: event 4 (COMPLETED attempt 1) unexpected in state COMPLETED",
		},
		{
			name: "an event step completed without waiting",
			step: "approve",
			log:  completedFirst,
			want: "approve: event 2 (COMPLETED attempt 1) without waiting in state RUNNING",
		},
		{
			name: "a waiting child step rescued",
			step: "sub",
			log: []eventRow{ev("QUEUED", 0), ev("STARTED", 1), ev("WAITING", 1, "child run "+fixtureChild),
				ev("LOST", 1, rescued), ev("QUEUED", 0), ev("STARTED", 1), ev("WAITING", 1, "child run "+fixtureChild),
				ev("COMPLETED", 1)},
			want: "sub: event 3 (LOST attempt 1) rescues a step that was not running in state WAITING",
		},
		{
			name: "a lost attempt counted as a failed one",
			step: "work-0",
			log: []eventRow{ev("QUEUED", 0), ev("STARTED", 1), ev("RETRYING", 1, rescued), ev("QUEUED", 1),
				ev("STARTED", 2), ev("COMPLETED", 2)},
			want: "work-0: event 2 (RETRYING attempt 1) counts a lost attempt as a failure in state RUNNING",
		},
		{
			name: "a step that runs code waiting",
			step: "work-0",
			log:  []eventRow{ev("QUEUED", 0), ev("STARTED", 1), ev("WAITING", 1), ev("COMPLETED", 1)},
			want: "work-0: event 2 (WAITING attempt 1) unexpected in state RUNNING",
		},
		{
			name: "a map step completed with an item cancelled",
			mutate: func(f *chaosFixture) {
				f.set("fan[3]", "CANCELLED", 0, "", nil, ev("QUEUED", 0), ev("CANCELLED", 0, "run cancelled"))
			},
			want: "fan: completed, but its item 3 is CANCELLED",
		},
		{
			name: "a child run never settled",
			mutate: func(f *chaosFixture) {
				f.run(fixtureChild).status = "RUNNING"
			},
			want: "child run " + fixtureChild + " (chaos-child) of run " + fixtureRun + " is RUNNING",
		},
		{
			name: "a run failed",
			mutate: func(f *chaosFixture) {
				f.run(fixtureRun).status = "FAILED"
			},
			want: "run " + fixtureRun + " (chaos) is FAILED",
		},
		{
			name: "a child run whose parent is not in the store",
			mutate: func(f *chaosFixture) {
				f.run(fixtureChild).parent = fixtureChild2
			},
			want: "child run " + fixtureChild + " (chaos-child) of run " + fixtureChild2 + ", which is not in the store",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newChaosFixture(7)
			if c.mutate != nil {
				c.mutate(f)
			} else {
				task := f.s.tasks[taskKey{fixtureRun, c.step}]
				f.set(c.step, "COMPLETED", c.log[len(c.log)-1].attempt, string(task.output), []int{1}, c.log...)
			}
			_, p := checkRecorded(f.s, 1)
			require.NotZero(t, p.total, "not caught")
			require.Contains(t, strings.Join(p.list, "\n"), c.want)
		})
	}
}
