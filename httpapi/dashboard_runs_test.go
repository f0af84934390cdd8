package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/store"
)

// newEngineEnv starts an engine on s serving defs, and its API as newEnv
// sets it up (the token, the tenant of the X-Tenant header).
func newEngineEnv(t *testing.T, s store.Store, defs ...durable.Definition) *env {
	t.Helper()
	e, err := durable.New(s, durable.Config{Logger: quiet, PollInterval: 50 * time.Millisecond,
		HeartbeatInterval: 200 * time.Millisecond, DeadAfter: 10 * time.Second}) // live at every read on a loaded machine
	require.NoError(t, err)
	require.NoError(t, e.Register(defs...))
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, e.Stop(ctx))
	})
	h := httpapi.New(e, httpapi.Options{
		Logger:       quiet,
		Authenticate: httpapi.BearerToken(token),
		Tenant: func(r *http.Request) (string, bool, error) {
			switch t := r.Header.Get("X-Tenant"); t {
			case "":
				return "", false, errors.New("no tenant header")
			case "*":
				return "", true, nil
			default:
				return t, false, nil
			}
		},
	})
	return &env{e: e, h: h}
}

func noop(durable.Context, int) (struct{}, error) { return struct{}{}, nil }

// waitingFlows are workflows whose runs wait for each kind of thing a run
// waits for: a signal, an event, a child run, a map step's items, a sleep,
// a retry's backoff (and, triggered with a start delay, a delayed start).
func waitingFlows() []durable.Definition {
	gate := durable.NewWorkflow[string]("gate")
	ok := durable.WaitForSignal[string](gate, "approved", "approve")
	durable.Step(gate, "record", func(ctx durable.Context, in string) (string, error) {
		by, _ := ok.Output(ctx)
		return in + " approved by " + by, nil
	}, durable.After(ok))

	paid := durable.NewWorkflow[string]("paid-order")
	got := durable.WaitForEvent[int](paid, "payment", func(_ durable.Context, order string) (string, error) {
		return "paid-" + order, nil
	})
	durable.Step(paid, "ship", func(ctx durable.Context, _ string) (int, error) {
		n, _ := got.Output(ctx)
		return n, nil
	}, durable.After(got))

	kid := durable.NewWorkflow[string]("kid")
	done := durable.WaitForEvent[string](kid, "done", func(_ durable.Context, in string) (string, error) { return "kid-" + in, nil })
	family := durable.NewWorkflow[string]("family")
	durable.Child(family, "sub", kid, done, func(_ durable.Context, in string) (string, error) { return in, nil })

	napper := durable.NewWorkflow[int]("napper")
	durable.Sleep(napper, "nap", time.Hour)

	hour := durable.WithRetry(durable.RetryPolicy{MaxRetries: 5, InitialDelay: time.Hour})
	retrier := durable.NewWorkflow[int]("retrier")
	durable.Step(retrier, "call", func(durable.Context, int) (int, error) { return 0, errors.New("gateway down") }, hour)

	fanout := durable.NewWorkflow[int]("fanout")
	list := durable.Step(fanout, "list", func(_ durable.Context, n int) ([]int, error) { return make([]int, n), nil })
	durable.Map(fanout, "items", list, func(durable.Context, int) (int, error) { return 0, errors.New("item down") }, hour)

	quick := durable.NewWorkflow[int]("quick")
	durable.Step(quick, "noop", noop)
	return []durable.Definition{gate, paid, kid, family, napper, retrier, fanout, quick}
}

// listedRun is a run of GET /api/v1/runs with its includes.
type listedRun struct {
	ID          uuid.UUID    `json:"id"`
	Workflow    string       `json:"workflow"`
	Status      string       `json:"status"`
	ParentID    uuid.UUID    `json:"parent_id"`
	HasChildren bool         `json:"has_children"`
	Waits       []listedWait `json:"waits"`
}

// listedWait is what a listed run waits for.
type listedWait struct {
	Step       string     `json:"step"`
	For        string     `json:"for"`
	EventKey   string     `json:"event_key"`
	Signal     string     `json:"signal"`
	ChildRunID uuid.UUID  `json:"child_run_id"`
	DueAt      *time.Time `json:"due_at"`
	Attempts   int        `json:"attempts"`
	Items      int        `json:"items"`
	ItemsLeft  int        `json:"items_left"`
}

func (en *env) listed(t *testing.T, tenant, query string) map[uuid.UUID]listedRun {
	t.Helper()
	r := en.do(t, tenant, "GET", "/api/v1/runs?"+query, nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var page struct {
		Runs []listedRun `json:"runs"`
	}
	require.NoError(t, json.Unmarshal(r.body, &page))
	out := map[uuid.UUID]listedRun{}
	for _, run := range page.Runs {
		out[run.ID] = run
	}
	return out
}

func TestListRunsIncludeMemory(t *testing.T) {
	t.Parallel()
	testListRunsInclude(t, newEngineEnv(t, memstore.New(), waitingFlows()...))
}

func TestListRunsIncludePostgreSQL(t *testing.T) {
	t.Parallel()
	testListRunsInclude(t, newEngineEnv(t, pgtest.Store(t), waitingFlows()...))
}

// testListRunsInclude: include=waits says what each running run of a page
// waits for; include=children marks the runs that started child runs.
func testListRunsInclude(t *testing.T, en *env) {
	gate := en.trigger(t, "acme", "gate", map[string]any{"input": "po-1"})
	paid := en.trigger(t, "acme", "paid-order", map[string]any{"input": "7"})
	family := en.trigger(t, "acme", "family", map[string]any{"input": "x"})
	napper := en.trigger(t, "acme", "napper", map[string]any{"input": 1})
	retrier := en.trigger(t, "acme", "retrier", map[string]any{"input": 1})
	delayed := en.trigger(t, "acme", "retrier", map[string]any{"input": 2, "start_after": "1h"})
	fanout := en.trigger(t, "acme", "fanout", map[string]any{"input": 2})
	quick := en.trigger(t, "acme", "quick", map[string]any{"input": 1})
	require.Equal(t, durabletype.RunCompleted, en.settle(t, quick).Status)

	// Without include: neither.
	for _, run := range en.listed(t, "acme", "") {
		require.Empty(t, run.Waits)
		require.False(t, run.HasChildren)
	}

	// Each run's wait, once its steps got there.
	var runs map[uuid.UUID]listedRun
	require.Eventually(t, func() bool {
		runs = en.listed(t, "acme", "include=waits,children")
		for _, id := range []uuid.UUID{gate, paid, family, napper, retrier, delayed, fanout} {
			if len(runs[id].Waits) != 1 {
				return false
			}
		}
		kid := runs[family].Waits[0].ChildRunID
		return len(runs) == 9 && kid != uuid.Nil && len(runs[kid].Waits) == 1 && runs[fanout].Waits[0].Items == 2
	}, 20*time.Second, 20*time.Millisecond)

	one := func(id uuid.UUID, step, what string) {
		t.Helper()
		require.Len(t, runs[id].Waits, 1, "run of %s", runs[id].Workflow)
		require.Equal(t, step, runs[id].Waits[0].Step)
		require.Equal(t, what, runs[id].Waits[0].For)
	}
	one(gate, "approved", "signal")
	require.Equal(t, "approve", runs[gate].Waits[0].Signal)
	require.Empty(t, runs[gate].Waits[0].EventKey)
	one(paid, "payment", "event")
	require.Equal(t, "paid-7", runs[paid].Waits[0].EventKey)
	one(family, "sub", "child")
	kid := runs[family].Waits[0].ChildRunID
	require.True(t, runs[family].HasChildren)
	require.Equal(t, family, runs[kid].ParentID)
	require.False(t, runs[kid].HasChildren)
	one(kid, "done", "event")
	require.Equal(t, "kid-x", runs[kid].Waits[0].EventKey)
	top := en.listed(t, "acme", "top_level=true")
	require.Len(t, top, len(runs)-1, "top_level=true leaves the child run out")
	require.NotContains(t, top, kid)
	require.Contains(t, top, family)
	require.Len(t, en.listed(t, "acme", "top_level=false"), len(runs))
	requireProblem(t, en.do(t, "acme", "GET", "/api/v1/runs?top_level=yes", nil), 400, "invalid_filter")
	requireProblem(t, en.do(t, "acme", "GET", "/api/v1/runs?top_level=true&parent="+family.String(), nil), 400, "invalid_filter")
	one(napper, "nap", "sleep")
	require.NotNil(t, runs[napper].Waits[0].DueAt)
	require.WithinDuration(t, time.Now().Add(time.Hour), *runs[napper].Waits[0].DueAt, time.Minute)
	one(retrier, "call", "retry")
	require.Equal(t, 1, runs[retrier].Waits[0].Attempts)
	require.WithinDuration(t, time.Now().Add(time.Hour), *runs[retrier].Waits[0].DueAt, time.Minute)
	one(delayed, "call", "start")
	require.Zero(t, runs[delayed].Waits[0].Attempts)
	require.WithinDuration(t, time.Now().Add(time.Hour), *runs[delayed].Waits[0].DueAt, time.Minute)
	one(fanout, "items", "items")
	require.Equal(t, 2, runs[fanout].Waits[0].Items)
	require.Equal(t, 2, runs[fanout].Waits[0].ItemsLeft)
	require.Empty(t, runs[quick].Waits)
	require.False(t, runs[quick].HasChildren)

	// The waits of the runs a signal and an event released are gone.
	r := en.do(t, "acme", "POST", "/api/v1/runs/"+gate.String()+"/signals", map[string]any{"name": "approve", "payload": "carol"})
	require.Equal(t, http.StatusAccepted, r.status, "body: %s", r.body)
	r = en.do(t, "acme", "POST", "/api/v1/events", map[string]any{"key": "paid-7", "payload": 5})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, durabletype.RunCompleted, en.settle(t, gate).Status)
	require.Equal(t, durabletype.RunCompleted, en.settle(t, paid).Status)
	runs = en.listed(t, "acme", "include=waits")
	require.Empty(t, runs[gate].Waits)
	require.Empty(t, runs[paid].Waits)
	require.False(t, runs[family].HasChildren, "children only when included")

	// Another tenant's scope sees none of them; an operator sees them all.
	require.Empty(t, en.listed(t, "other", "include=waits,children"))
	require.Len(t, en.listed(t, "*", "include=waits,children&limit=100"), 9)

	// Includes are named, and cost a read per run: pages of 100 at most.
	requireProblem(t, en.do(t, "acme", "GET", "/api/v1/runs?include=steps", nil), 400, "invalid_filter")
	requireProblem(t, en.do(t, "acme", "GET", "/api/v1/runs?include=waits&limit=101", nil), 400, "invalid_filter")
	require.Len(t, en.listed(t, "acme", "include=waits&include=children&limit=2"), 2)
}

// TestDashboardRunsList: the runs list shows each run's duration, what a
// running run waits for, a child run's parent and a parent's child runs,
// whose link lists them.
func TestDashboardRunsList(t *testing.T) {
	t.Parallel()
	en := newEngineEnv(t, memstore.New(), waitingFlows()...)
	srv := httptest.NewServer(httpapi.New(en.e, httpapi.Options{Logger: quiet, Dashboard: true}))
	t.Cleanup(srv.Close)
	quick := en.trigger(t, "acme", "quick", map[string]any{"input": 1})
	require.Equal(t, durabletype.RunCompleted, en.settle(t, quick).Status)
	gate := en.trigger(t, "acme", "gate", map[string]any{"input": "po-1"})
	napper := en.trigger(t, "acme", "napper", map[string]any{"input": 1})
	retrier := en.trigger(t, "acme", "retrier", map[string]any{"input": 1})
	family := en.trigger(t, "acme", "family", map[string]any{"input": "x"})
	var kid uuid.UUID
	require.Eventually(t, func() bool {
		res, err := en.e.Get(context.Background(), family)
		require.NoError(t, err)
		sub, _ := res.Step("sub")
		kid = sub.ChildRunID
		return kid != uuid.Nil
	}, 20*time.Second, 20*time.Millisecond)

	row := func(id uuid.UUID) string { return fmt.Sprintf(`#runs tr[data-run="%s"]`, id) }
	ctx := browser(t)
	shot := screenshots(t)
	// By default the list holds the top-level runs only: the child run is
	// reached from its parent; the toggle lists every run.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(row(family)+` a.children`),
		chromedp.WaitVisible(`#f-top-level:checked`),
	))
	kids, err := chromedp.Run(ctx, chromedp.Nodes(row(kid), chromedp.AtLeast(0)))
	require.NoError(t, err)
	require.Empty(t, kids, "the child run is not listed by default")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`#f-top-level`),
		chromedp.WaitVisible(row(kid)),
		chromedp.WaitVisible(`#f-top-level:not(:checked)`),
	))
	hash, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash`))
	require.NoError(t, err)
	require.Equal(t, "#/?top_level=false", hash)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/#/?top_level=false"),
		chromedp.WaitVisible(row(gate)+` .wait[data-step="approved"][data-for="signal"]`),
		chromedp.WaitVisible(row(napper)+` .wait[data-step="nap"][data-for="sleep"]`),
		chromedp.WaitVisible(row(retrier)+` .wait[data-step="call"][data-for="retry"]`),
		chromedp.WaitVisible(row(family)+` .wait[data-step="sub"][data-for="child"] a[href="#/runs/`+kid.String()+`"]`),
		chromedp.WaitVisible(row(kid)+` .wait[data-step="done"][data-for="event"]`),
		// The family: the child links to its parent, the parent to its
		// child runs.
		chromedp.WaitVisible(row(kid)+` a.parent[data-parent="`+family.String()+`"]`),
		chromedp.WaitVisible(row(family)+` a.children`),
		chromedp.WaitVisible(row(quick)+` .duration`),
		chromedp.WaitVisible(row(gate)+` .duration.running`),
		shot("dashboard-runs-waits.png"),
	))
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		require.NoError(t, err)
		return s
	}
	require.Equal(t, `approved: signal "approve"`, text(row(gate)+` .wait`))
	require.Equal(t, `done: event "kid-x"`, text(row(kid)+` .wait`))
	require.Regexp(t, `^nap: sleep, wakes in 59m \d\ds$`, text(row(napper)+` .wait`))
	require.Regexp(t, `^call: retry after attempt 1, in 59m \d\ds$`, text(row(retrier)+` .wait`))
	require.Regexp(t, `^sub: child run [0-9a-f]{8}…$`, text(row(family)+` .wait`))
	require.Regexp(t, `^child of [0-9a-f]{8}… \(sub\)$`, text(row(kid)+` .family`))
	require.Regexp(t, `^(< 1 ms|\d+ ms|\d+\.\d s)$`, text(row(quick)+` .duration`))
	require.Empty(t, text(row(quick)+` td.waits`))
	links, err := chromedp.Run(ctx, chromedp.Nodes(`#runs a.children`, chromedp.AtLeast(0)))
	require.NoError(t, err)
	require.Len(t, links, 1, "only the family run has child runs")

	// Durations in readable units.
	units, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[0.4, 850, 12300, 245000, 3*3600e3 + 12*60e3, 2*86400e3 + 4*3600e3].map(fmtDuration)`))
	require.NoError(t, err)
	require.Equal(t, []string{"< 1 ms", "850 ms", "12.3 s", "4m 05s", "3h 12m", "2d 4h"}, units)

	// The parent's link lists its child runs only; the chip's button lists
	// every run again.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(row(family)+` a.children`),
		chromedp.WaitVisible(`#f-parent`),
		chromedp.WaitVisible(row(kid)),
		chromedp.WaitNotPresent(row(family)),
		chromedp.WaitNotPresent(row(gate)),
		chromedp.WaitVisible(`#f-top-level:disabled`),
		chromedp.Click(`#f-parent button`),
		chromedp.WaitVisible(row(gate)),
		chromedp.WaitNotPresent(`#f-parent`),
		chromedp.WaitVisible(`#f-top-level:checked:enabled`),
		// The parent's page links to its child runs too.
		chromedp.Navigate(srv.URL+"/#/runs/"+family.String()),
		chromedp.WaitVisible(`#waits li[data-step="sub"][data-for="child"]`),
		chromedp.Click(`#child-runs`),
		chromedp.WaitVisible(row(kid)),
		chromedp.WaitNotPresent(row(gate)),
	))
}
