package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/memstore"
)

// approvalFunc is the durable function the tests of a function's run use:
// a step that fails its first attempt and is retried (fetch), two steps in
// parallel (left and right, started with Go: each waits until both run),
// a sleep of nap (cool-off), a wait for the signal "approve" (approve),
// then a last step (record). Its calls are numbered 0 to 5.
func approvalFunc(nap time.Duration) *durable.Function[int, string] {
	var arrived atomic.Int32
	both := make(chan struct{})
	pair := func(v int) func(ctx durable.Context) (int, error) {
		return func(ctx durable.Context) (int, error) {
			if arrived.Add(1) == 2 {
				close(both)
			}
			select {
			case <-both:
				return v, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
	}
	return durable.NewFunction("approval", func(ctx durable.FuncContext, n int) (string, error) {
		a, err := durable.Do(ctx, "fetch", func(c durable.Context) (int, error) {
			if c.Attempt() == 1 {
				return 0, errors.New("upstream flaky")
			}
			return n + 1, nil
		}, durable.WithRetry(durable.RetryPolicy{MaxRetries: 2, InitialDelay: 10 * time.Millisecond}))
		if err != nil {
			return "", err
		}
		l, r := durable.Go(ctx, "left", pair(10)), durable.Go(ctx, "right", pair(20))
		if err := durable.AwaitAll(ctx, l, r); err != nil {
			return "", err
		}
		lv, _ := l.Get(ctx)
		rv, _ := r.Get(ctx)
		durable.SleepFor(ctx, "cool-off", nap)
		ok, err := durable.AwaitSignal[bool](ctx, "approve", "approve")
		if err != nil {
			return "", err
		}
		return durable.Do(ctx, "record", func(durable.Context) (string, error) {
			return fmt.Sprintf("%d %d %d %v", a, lv, rv, ok), nil
		})
	})
}

// apiCall is a call of GET /api/v1/runs/{id}.
type apiCall struct {
	Number     int                   `json:"number"`
	Name       string                `json:"name"`
	Kind       string                `json:"kind"`
	State      durabletype.TaskState `json:"state"`
	Attempts   int                   `json:"attempts"`
	Error      string                `json:"error"`
	DueAt      *time.Time            `json:"due_at"`
	StartedAt  *time.Time            `json:"started_at"`
	FinishedAt *time.Time            `json:"finished_at"`
	EventKey   string                `json:"event_key"`
	Signal     string                `json:"signal"`
	ChildRunID *uuid.UUID            `json:"child_run_id"`
	Output     json.RawMessage       `json:"output"`
}

// apiFuncRun is a function's run as GET /api/v1/runs/{id} answers it.
type apiFuncRun struct {
	Kind  string `json:"kind"`
	Steps []struct {
		Name  string                `json:"name"`
		Kind  string                `json:"kind"`
		State durabletype.TaskState `json:"state"`
	} `json:"steps"`
	Calls []apiCall `json:"calls"`
}

func (en *env) funcRun(t *testing.T, id uuid.UUID) apiFuncRun {
	t.Helper()
	var run apiFuncRun
	en.decode(t, "acme", "GET", "/api/v1/runs/"+id.String(), nil, http.StatusOK, &run)
	return run
}

// waitForSignal waits until the body of function run id waits for a
// signal.
func (en *env) waitForSignal(t *testing.T, id uuid.UUID) {
	t.Helper()
	require.Eventually(t, func() bool {
		res, err := en.e.Get(context.Background(), id)
		require.NoError(t, err)
		return res.Steps[0].State == durabletype.TaskWaiting && res.Steps[0].Signal != ""
	}, 20*time.Second, 10*time.Millisecond)
}

// TestFunctionRunAPIMemory (and on PostgreSQL): a function's run lists its calls in order beside
// its body (the one step), each with its kind, state, attempts, times,
// what it waits for and its output; the parallel pair's times overlap;
// the run in flight waits for its signal in the run list; the workflows
// say it is a function; a replay from a call makes that call and the
// later ones again.
func TestFunctionRunAPIMemory(t *testing.T) {
	t.Parallel()
	testFunctionRunAPI(t, newEngineEnv(t, memstore.New(), approvalFunc(50*time.Millisecond), waitingFlows()[0]))
}

func TestFunctionRunAPIPostgreSQL(t *testing.T) {
	t.Parallel()
	testFunctionRunAPI(t, newEngineEnv(t, pgtestStore(t), approvalFunc(50*time.Millisecond), waitingFlows()[0]))
}

func testFunctionRunAPI(t *testing.T, en *env) {

	wfs := en.workflows(t, "acme")
	require.Equal(t, "function", wfs["approval"].Kind)
	require.Equal(t, "workflow", wfs["gate"].Kind)

	id := en.trigger(t, "acme", "approval", map[string]any{"input": 1})
	en.waitForSignal(t, id)
	run := en.funcRun(t, id)
	require.Equal(t, "function", run.Kind)
	require.Len(t, run.Steps, 1, "the body is the one step; its calls are in calls")
	require.Equal(t, "main", run.Steps[0].Name)
	require.Equal(t, "func", run.Steps[0].Kind)
	require.Equal(t, durabletype.TaskWaiting, run.Steps[0].State)
	var names, kinds []string
	var states []durabletype.TaskState
	for k, c := range run.Calls {
		require.Equal(t, k, c.Number)
		names, kinds, states = append(names, c.Name), append(kinds, c.Kind), append(states, c.State)
		require.NotNil(t, c.StartedAt, "call %s", c.Name)
	}
	require.Equal(t, []string{"fetch", "left", "right", "cool-off", "approve"}, names)
	require.Equal(t, []string{"step", "step", "step", "sleep", "event"}, kinds)
	require.Equal(t, []durabletype.TaskState{durabletype.TaskCompleted, durabletype.TaskCompleted, durabletype.TaskCompleted,
		durabletype.TaskCompleted, durabletype.TaskWaiting}, states)
	fetch, left, right, nap, approve := run.Calls[0], run.Calls[1], run.Calls[2], run.Calls[3], run.Calls[4]
	require.Equal(t, 2, fetch.Attempts, "the step failed once, then completed")
	require.JSONEq(t, "2", string(fetch.Output))
	require.JSONEq(t, "10", string(left.Output))
	require.False(t, left.StartedAt.After(*right.FinishedAt), "the Go pair ran side by side")
	require.False(t, right.StartedAt.After(*left.FinishedAt), "the Go pair ran side by side")
	require.Nil(t, nap.DueAt, "a sleep over waits for nothing")
	require.GreaterOrEqual(t, nap.FinishedAt.Sub(*nap.StartedAt), 50*time.Millisecond)
	require.Equal(t, "approve", approve.Signal)
	require.Empty(t, approve.EventKey)
	require.Nil(t, approve.DueAt, "no timeout")
	require.Nil(t, approve.FinishedAt)

	waits := en.listed(t, "acme", "include=waits")[id].Waits
	require.Len(t, waits, 1, "the function waits for its signal, once: %+v", waits)
	require.Equal(t, "main", waits[0].Step)
	require.Equal(t, "signal", waits[0].For)
	require.Equal(t, "approve", waits[0].Signal)

	require.NoError(t, en.e.Signal(context.Background(), id, "approve", true))
	res := en.settle(t, id)
	require.Equal(t, durabletype.RunCompleted, res.Status, "error: %v", res.Err)
	run = en.funcRun(t, id)
	require.Len(t, run.Calls, 6)
	require.JSONEq(t, "true", string(run.Calls[4].Output))
	require.Equal(t, "record", run.Calls[5].Name)
	require.JSONEq(t, `"2 10 20 true"`, string(run.Calls[5].Output))

	requireProblem(t, en.do(t, "acme", "POST", "/api/v1/runs/"+id.String()+"/replay", map[string]any{"from_step": "nope"}),
		http.StatusBadRequest, "step_not_found")
	first := run
	r := en.do(t, "acme", "POST", "/api/v1/runs/"+id.String()+"/replay", map[string]any{"from_step": "cool-off"})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	res = en.settle(t, id)
	require.Equal(t, durabletype.RunCompleted, res.Status, "error: %v", res.Err)
	run = en.funcRun(t, id)
	require.Len(t, run.Calls, 6)
	for k := range 3 {
		require.Equal(t, first.Calls[k], run.Calls[k], "call %d, before cool-off, kept its record", k)
	}
	require.True(t, run.Calls[3].StartedAt.After(*first.Calls[5].FinishedAt), "cool-off slept again, after the first run")
	require.JSONEq(t, `"2 10 20 true"`, string(run.Calls[5].Output), "the signal sent stays the run's")
}

// TestDashboardFunctionRun: the page of a function's run draws its calls
// in order, the Go pair's bars overlapping in time and marked parallel,
// the retried step with its attempts, the sleep, and the signal it waits
// for, which can be sent from the page; a call shows its detail; the page
// logs no console error (browsertest).
func TestDashboardFunctionRun(t *testing.T) {
	t.Parallel()
	en := newEngineEnv(t, memstore.New(), approvalFunc(50*time.Millisecond))
	srv := httptest.NewServer(httpapi.New(en.e, httpapi.Options{Logger: quiet, Dashboard: true}))
	t.Cleanup(srv.Close)
	id := en.trigger(t, "acme", "approval", map[string]any{"input": 1})
	en.waitForSignal(t, id)

	ctx := browser(t)
	shot := screenshots(t)
	call := func(key string) string { return fmt.Sprintf(`#calls .call[data-call="%s"]`, key) }
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/#/runs/"+id.String()),
		chromedp.WaitVisible(call("approve#4")+`[data-kind="event"][data-state="WAITING"]`),
		chromedp.WaitVisible(call("fetch#0")+`[data-state="COMPLETED"][data-parallel="false"] rect.bar[data-attempt="2"]`),
		chromedp.WaitVisible(call("fetch#0")+` rect.gap.backoff`),
		chromedp.WaitVisible(call("left#1")+`[data-parallel="true"]`),
		chromedp.WaitVisible(call("right#2")+`[data-parallel="true"]`),
		chromedp.WaitVisible(call("cool-off#3")+`[data-kind="sleep"] rect.gap.sleeping`),
		chromedp.WaitVisible(`#call-table tr[data-call="approve#4"]`),
		chromedp.WaitVisible(`#waits li[data-step="approve#4"][data-for="signal"] button.send`),
		chromedp.WaitNotPresent(`#dag`),
		shot("dashboard-function-run.png"),
	))
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#calls .call")].map((g) => g.dataset.call)`))
	require.NoError(t, err)
	require.Equal(t, []string{"fetch#0", "left#1", "right#2", "cool-off#3", "approve#4"}, rows, "the calls in the order made")
	spans, err := chromedp.Run(ctx, chromedp.Evaluate[[][]float64](`["left#1", "right#2"].map((k) => {
		const r = document.querySelector('#calls .call[data-call="' + k + '"] rect.bar');
		return [+r.getAttribute("x"), +r.getAttribute("x") + +r.getAttribute("width")];
	})`))
	require.NoError(t, err)
	require.LessOrEqual(t, spans[0][0], spans[1][1], "the pair's bars overlap (to the pixel): %v", spans)
	require.LessOrEqual(t, spans[1][0], spans[0][1], "the pair's bars overlap (to the pixel): %v", spans)

	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(call("fetch#0")),
		chromedp.WaitVisible(`#call-detail h2`),
		chromedp.WaitVisible(`#call-table tr.selected[data-call="fetch#0"]`),
	))
	detail, err := chromedp.Run(ctx, chromedp.Text(`#call-detail`))
	require.NoError(t, err)
	require.Contains(t, detail, "Call fetch#0")
	require.Contains(t, detail, "attempts\n2")

	// The signal, sent from the page: the function completes.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`#waits li[data-step="approve#4"] button.send`),
		chromedp.WaitVisible(`#confirm[open] #send-payload`),
		chromedp.SendKeys(`#send-payload`, "true"),
		chromedp.Click(`#confirm-yes`),
		chromedp.WaitVisible(`h1 .badge[data-status="COMPLETED"]`),
		chromedp.WaitVisible(call("approve#4")+`[data-state="COMPLETED"]`),
		chromedp.WaitVisible(call("record#5")+`[data-state="COMPLETED"]`),
	))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/#/workflows"),
		chromedp.WaitVisible(`section[data-workflow="approval"][data-kind="function"] h2 .badge.function`),
		chromedp.WaitVisible(`section[data-workflow="approval"] svg .node[data-step="main"]`),
	))
	res := en.settle(t, id)
	out, err := approvalFunc(time.Millisecond).Output(res)
	require.NoError(t, err)
	require.Equal(t, "2 10 20 true", out)
}
