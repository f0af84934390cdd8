package crashtest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/cmd/durable/internal/workloads"
)

// funcFixture is a crash-fn run and its child run as the store,
// fn_executions and fn_effects would show them after a run without crash.
type funcFixture struct {
	s              *snapshot
	execs, effects []funcExec
}

func newFuncFixture(n int) *funcFixture {
	f := &funcFixture{s: &snapshot{tasks: map[taskKey]taskRow{}, events: map[taskKey][]eventRow{}}}
	in, _ := json.Marshal(workloads.FuncInput{N: n})
	f.s.runs = []runRow{
		{id: fixtureRun, workflow: workloads.Func, status: "COMPLETED", input: in},
		{id: fixtureChild, workflow: workloads.FuncChild, status: "COMPLETED", input: in,
			parent: fixtureRun, parentStep: "~main[8:sub]", parentResult: "main"},
	}
	js := func(v any) []byte { b, _ := json.Marshal(v); return b }
	// step records call's execution and its result.
	step := func(run, name string, attempt int) string {
		call := strings.Split(name, "#")[0]
		nonce := fmt.Sprintf("%s-%s-%d", run[len(run)-1:], call, attempt)
		out := workloads.FuncStepResult(call, n, nonce)
		f.execs = append(f.execs, funcExec{run: run, call: call, nonce: nonce, attempt: attempt})
		f.s.tasks[taskKey{run, name}] = taskRow{taskKey: taskKey{run, name}, kind: "step", state: "COMPLETED", attempt: attempt, output: js(out)}
		f.s.events[taskKey{run, name}] = []eventRow{ev("COMPLETED", attempt)}
		return out
	}
	waited := func(run, name, kind, typ, outcome string, out []byte) {
		k := taskKey{run, name}
		f.s.tasks[k] = taskRow{taskKey: k, kind: kind, state: "COMPLETED", output: out}
		f.s.events[k] = []eventRow{ev(typ, 0), later(ev(outcome, 0), time.Second)}
	}
	body := func(run string, out any) {
		k := taskKey{run, "main"}
		f.s.tasks[k] = taskRow{taskKey: k, kind: "func", state: "COMPLETED", attempt: 1, output: js(out)}
		f.s.events[k] = []eventRow{ev("QUEUED", 0), ev("STARTED", 1), ev("COMPLETED", 1)}
	}

	a, b := step(fixtureChild, "a#0", 1), ""
	waited(fixtureChild, "nap#1", "sleep", "SLEEPING", "WOKEN", nil)
	b = step(fixtureChild, "b#2", 1)
	body(fixtureChild, a+"+"+b)

	out := workloads.FuncOutput{Prepare: step(fixtureRun, "prepare#0", 1)}
	f.execs = append(f.execs, funcExec{run: fixtureRun, call: "flaky", nonce: "failed", attempt: 1})
	out.Flaky = step(fixtureRun, "flaky#1", 2)
	f.s.events[taskKey{fixtureRun, "flaky#1"}] = []eventRow{ev("RETRYING", 1, workloads.ErrFlaky.Error()), ev("COMPLETED", 2)}
	out.Ledger = step(fixtureRun, "ledger#2", 1)
	_, _, nonce, _ := workloads.ParseFuncStepResult(out.Ledger)
	f.effects = []funcExec{{run: fixtureRun, call: "ledger", nonce: nonce, attempt: 1}}
	waited(fixtureRun, "nap#3", "sleep", "SLEEPING", "WOKEN", nil)
	for k := range workloads.FuncParts {
		out.Parts = append(out.Parts, step(fixtureRun, fmt.Sprintf("part-%d#%d", k, 4+k), 1))
	}
	out.Child = a + "+" + b
	waited(fixtureRun, "sub#8", "child", "WAITING", "COMPLETED", js(out.Child))
	sub := f.s.tasks[taskKey{fixtureRun, "sub#8"}]
	sub.child = fixtureChild
	f.s.tasks[taskKey{fixtureRun, "sub#8"}] = sub
	out.Paid, out.Approved = funcPayment(n), funcApproval(n)
	waited(fixtureRun, "paid#9", "event", "WAITING", "COMPLETED", js(out.Paid))
	waited(fixtureRun, "approve#10", "event", "WAITING", "COMPLETED", js(out.Approved))
	out.Finish = step(fixtureRun, "finish#11", 1)
	body(fixtureRun, out)
	return f
}

// TestCheckFunctions: the verification of TestFunctionChaos passes a run
// without crash, and finds a result recorded twice, a row written twice, a
// result of no execution, a step run after its result was recorded, and an
// output that is not the records'.
func TestCheckFunctions(t *testing.T) {
	check := func(f *funcFixture) []string {
		st, p := checkFunctions(f.s, f.execs, f.effects, nil, 1)
		require.Equal(t, 1, st.runs)
		return p.list
	}
	f := newFuncFixture(7)
	require.Empty(t, check(f))

	// A re-execution (its worker killed before the result was recorded)
	// is at least once, not a problem.
	f.execs = append(f.execs, funcExec{run: fixtureRun, call: "prepare", nonce: "lost", attempt: 1})
	st, p := checkFunctions(f.s, f.execs, f.effects, nil, 1)
	require.Empty(t, p.list)
	require.Equal(t, 1, st.reexecutions)

	cases := map[string]func(f *funcFixture){
		"2 recorded outcomes": func(f *funcFixture) {
			k := taskKey{fixtureRun, "part-2#6"}
			f.s.events[k] = append(f.s.events[k], ev("COMPLETED", 1))
		},
		"2 rows of ledger": func(f *funcFixture) { f.effects = append(f.effects, f.effects[0]) },
		"of no execution": func(f *funcFixture) {
			f.execs = f.execs[1:] // the child's a
		},
		"after attempt": func(f *funcFixture) {
			f.execs = append(f.execs, funcExec{run: fixtureRun, call: "finish", nonce: "late", attempt: 2})
		},
		"want the records'": func(f *funcFixture) {
			k := taskKey{fixtureRun, "main"}
			task := f.s.tasks[k]
			task.output = []byte(strings.Replace(string(task.output), "paid-7", "paid-8", 1))
			f.s.tasks[k] = task
		},
		"records [": func(f *funcFixture) { delete(f.s.tasks, taskKey{fixtureRun, "finish#11"}) },
	}
	for want, mutate := range cases {
		f := newFuncFixture(7)
		mutate(f)
		got := check(f)
		require.NotEmpty(t, got, want)
		require.Contains(t, strings.Join(got, "\n"), want)
	}
}
