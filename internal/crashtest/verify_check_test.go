package crashtest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/workloads"
)

// These tests check the verification itself, on synthetic snapshots and
// execution rows: they need neither processes nor a database, and run
// without DURABLE_CRASH_TESTS.

const fixtureRun = "00000000-0000-0000-0000-000000000001"

// ev is an event of a synthetic log.
func ev(typ string, attempt int, detail ...string) eventRow {
	return eventRow{typ: typ, attempt: attempt, detail: strings.Join(detail, "")}
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
	// The worker was killed during attempt 1, which was rescued; attempt 2
	// completed.
	rescuedThenCompleted = []eventRow{ev("QUEUED", 0), ev("STARTED", 1), ev("RETRYING", 1, rescued),
		ev("QUEUED", 1), ev("STARTED", 2), ev("COMPLETED", 2)}
)

// chaosFixture is one chaos run as the store and chaos_executions would
// show it.
type chaosFixture struct {
	n     int
	s     *snapshot
	execs map[string][]int // attempts executed, per step
}

// newChaosFixture is a chaos run for input n without any crash: every step
// executed and completed by its first attempt, but flaky, whose first
// attempt failed by design.
func newChaosFixture(n int) *chaosFixture {
	in, _ := json.Marshal(workloads.ChaosInput{N: n})
	f := &chaosFixture{n: n, execs: map[string][]int{},
		s: &snapshot{
			runs:   []runRow{{id: fixtureRun, workflow: workloads.Chaos, status: "COMPLETED", input: in}},
			tasks:  map[taskKey]taskRow{},
			events: map[taskKey][]eventRow{},
		}}
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
	f.set("join", "COMPLETED", 1, fmt.Sprintf(`"%s/%d"`, taken, n), []int{1}, completedFirst...)
	return f
}

func (f *chaosFixture) branches() (taken, other string) {
	if f.n%2 == 1 {
		return "odd", "even"
	}
	return "even", "odd"
}

// set replaces a step's task, event log and executions.
func (f *chaosFixture) set(step, state string, attempt int, output string, execs []int, evs ...eventRow) {
	k := taskKey{fixtureRun, step}
	kind := "step"
	if step == "nap" {
		kind = "sleep"
	}
	task := taskRow{taskKey: k, kind: kind, state: state, attempt: attempt}
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
	f.execs[step] = execs
}

// rows are the fixture's chaos_executions rows.
func (f *chaosFixture) rows() []attemptKey {
	var rows []attemptKey
	for _, step := range chaosSteps {
		for _, a := range f.execs[step] {
			rows = append(rows, attemptKey{fixtureRun, step, a})
		}
	}
	return rows
}

func (f *chaosFixture) check() (executionStats, *problems) {
	return checkChaos(f.s, f.rows())
}

// requireRecordedOK checks that the fixture's logs are ones verifyRecorded
// accepts, so that the chaos verification is tested on realistic input.
func requireRecordedOK(t *testing.T, f *chaosFixture) {
	t.Helper()
	_, p := checkRecorded(f.s, 1)
	require.Zero(t, p.total, "the fixture's recorded state: %s", strings.Join(p.list, "\n"))
}

func TestCheckChaosClean(t *testing.T) {
	for _, n := range []int{6, 7} {
		f := newChaosFixture(n)
		requireRecordedOK(t, f)
		st, p := f.check()
		require.Zero(t, p.total, "n=%d: %s", n, strings.Join(p.list, "\n"))
		require.Equal(t, executionStats{executions: 9, recordedSteps: 8, reexecutions: 0}, st)
	}
}

// TestCheckChaosAtLeastOnce: attempts of killed and draining workers, with
// or without their side effect, are executions the engine is allowed.
func TestCheckChaosAtLeastOnce(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(f *chaosFixture)
		reexec int
	}{
		{
			// The interleaving verifyChaos used to fail: flaky's first
			// attempt was STARTED, its worker died before the attempt's row
			// committed, and the rescued step's attempt 2 completed, so
			// attempt 1 never got to fail by design and has no row.
			name: "flaky's first attempt started, killed before its side effect, rescued",
			mutate: func(f *chaosFixture) {
				f.set("flaky", "COMPLETED", 2, fmt.Sprintf(`"flaky/%d"`, f.n), []int{2}, rescuedThenCompleted...)
			},
		},
		{
			name: "a step's attempt killed before its side effect, rescued",
			mutate: func(f *chaosFixture) {
				f.set("work-1", "COMPLETED", 2, fmt.Sprintf(`"work-1/%d"`, f.n), []int{2}, rescuedThenCompleted...)
			},
		},
		{
			name: "a step's attempt killed after its side effect, rescued",
			mutate: func(f *chaosFixture) {
				f.set("work-2", "COMPLETED", 2, fmt.Sprintf(`"work-2/%d"`, f.n), []int{1, 2}, rescuedThenCompleted...)
			},
			reexec: 1,
		},
		{
			name: "flaky killed twice: attempt 1 before its side effect, attempt 2 after",
			mutate: func(f *chaosFixture) {
				f.set("flaky", "COMPLETED", 3, fmt.Sprintf(`"flaky/%d"`, f.n), []int{2, 3}, ev("QUEUED", 0),
					ev("STARTED", 1), ev("RETRYING", 1, rescued), ev("QUEUED", 1),
					ev("STARTED", 2), ev("RETRYING", 2, rescued), ev("QUEUED", 2),
					ev("STARTED", 3), ev("COMPLETED", 3))
			},
			reexec: 1,
		},
		{
			name: "flaky failed by design, then killed before its side effect",
			mutate: func(f *chaosFixture) {
				f.set("flaky", "COMPLETED", 3, fmt.Sprintf(`"flaky/%d"`, f.n), []int{1, 3}, ev("QUEUED", 0),
					ev("STARTED", 1), ev("RETRYING", 1, flakyErr), ev("QUEUED", 1),
					ev("STARTED", 2), ev("RETRYING", 2, rescued), ev("QUEUED", 2),
					ev("STARTED", 3), ev("COMPLETED", 3))
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
			reexec: 1,
		},
		{
			name: "the skipped branch killed while deciding, rescued",
			mutate: func(f *chaosFixture) {
				_, other := f.branches()
				f.set(other, "SKIPPED", 2, "", nil, ev("QUEUED", 0), ev("STARTED", 1), ev("RETRYING", 1, rescued),
					ev("QUEUED", 1), ev("STARTED", 2), ev("SKIPPED", 2))
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
			require.Equal(t, c.reexec, st.reexecutions)
			require.Equal(t, 8, st.recordedSteps)
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
				f.execs["work-0"] = []int{1, 1}
			},
			want: "work-0 attempt 1 executed 2 times, started 1 times",
		},
		{
			name: "a double execution of the attempt that completed after a rescue",
			mutate: func(f *chaosFixture) {
				f.set("work-1", "COMPLETED", 2, fmt.Sprintf(`"work-1/%d"`, f.n), []int{2, 2}, rescuedThenCompleted...)
			},
			want: "work-1 attempt 2 executed 2 times, started 1 times",
		},
		{
			name: "an execution of an attempt the engine never started",
			mutate: func(f *chaosFixture) {
				f.execs["work-2"] = []int{1, 2}
			},
			want: "work-2 attempt 2 executed 1 times, started 0 times",
		},
		{
			name: "a completed attempt without its side effect",
			mutate: func(f *chaosFixture) {
				f.execs["work-0"] = nil
			},
			want: "work-0 was recorded by attempt 1, which never executed",
		},
		{
			name: "a completed attempt without its side effect, after a rescue with one",
			mutate: func(f *chaosFixture) {
				f.set("work-1", "COMPLETED", 2, fmt.Sprintf(`"work-1/%d"`, f.n), []int{1}, rescuedThenCompleted...)
			},
			want: "work-1 was recorded by attempt 2, which never executed",
		},
		{
			name: "flaky's failure by design without its side effect",
			mutate: func(f *chaosFixture) {
				f.execs["flaky"] = []int{2}
			},
			want: "flaky attempt 1 failed in the step's code, which it never executed",
		},
		{
			name: "flaky's failure by design on a later attempt",
			mutate: func(f *chaosFixture) {
				f.set("flaky", "COMPLETED", 3, fmt.Sprintf(`"flaky/%d"`, f.n), []int{2, 3}, ev("QUEUED", 0),
					ev("STARTED", 1), ev("RETRYING", 1, rescued), ev("QUEUED", 1),
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
				f.execs[other] = []int{1}
			},
			want: "skipped branch even was executed 1 times",
		},
		{
			name: "the sleep executed",
			mutate: func(f *chaosFixture) {
				f.execs["nap"] = []int{0}
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

// TestCheckRecordedCatches: an outcome recorded twice, or an attempt
// executed without a STARTED event, is not a valid log.
func TestCheckRecordedCatches(t *testing.T) {
	cases := []struct {
		name string
		log  []eventRow
		want string
	}{
		{
			name: "an output recorded twice",
			log:  []eventRow{ev("QUEUED", 0), ev("STARTED", 1), ev("COMPLETED", 1), ev("COMPLETED", 1)},
			want: "event 3 (COMPLETED attempt 1) unexpected in state COMPLETED",
		},
		{
			name: "a rescued attempt completed after all, and its next attempt too",
			log: []eventRow{ev("QUEUED", 0), ev("STARTED", 1), ev("RETRYING", 1, rescued), ev("COMPLETED", 1),
				ev("QUEUED", 1), ev("STARTED", 2), ev("COMPLETED", 2)},
			want: "event 3 (COMPLETED attempt 1) unexpected in state QUEUED",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newChaosFixture(7)
			f.set("work-0", "COMPLETED", c.log[len(c.log)-1].attempt, fmt.Sprintf(`"work-0/%d"`, f.n), []int{1}, c.log...)
			_, p := checkRecorded(f.s, 1)
			require.NotZero(t, p.total, "not caught")
			require.Contains(t, strings.Join(p.list, "\n"), c.want)
		})
	}
}
