package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/internal/tools/browsertest"
	"github.com/effectivelabs/durable/memstore"
)

// browser starts a headless Chromium and returns its context, with a
// timeout for the test's actions; the test fails on any console error
// (browsertest.New).
func browser(t *testing.T) context.Context {
	t.Helper()
	return browsertest.New(t)
}

// browserExpecting is browser for a test that expects the API to refuse
// some of the page's requests: a failed load of the API whose message has
// one of expected (such as "status of 409") is not a problem, and each of
// them must have been seen.
func browserExpecting(t *testing.T, expected ...string) context.Context {
	t.Helper()
	return browsertest.New(t, expected...)
}

// TestDashboardReplay opens a failed run's page, sees the failed step
// marked on the DAG, replays the run once fixed, and sees it complete.
func TestDashboardReplay(t *testing.T) {
	t.Parallel()
	en := newEnv(t, memstore.New())
	srv := httptest.NewServer(httpapi.New(en.e, httpapi.Options{Logger: quiet, Dashboard: true}))
	t.Cleanup(srv.Close)
	ok := en.trigger(t, "a", "greet", map[string]any{"input": map[string]any{"name": "<img src=x onerror=alert(1)>"}})
	en.settle(t, ok)
	id := en.trigger(t, "a", "flaky", map[string]any{"input": 4})
	require.Equal(t, durabletype.RunFailed, en.settle(t, id).Status)

	ctx := browser(t)
	shots := map[string][]byte{}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if os.Getenv("DURABLE_UPDATE_SCREENSHOTS") == "" {
				return nil
			}
			b, err := chromedp.FullScreenshot(100)(ctx, tg)
			shots[name] = b
			return err
		})
	}
	require.NoError(t, chromedp.Do(ctx,
		// The runs list, its rows linking to the runs.
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-run="%s"] .badge[data-status="FAILED"]`, id)),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-run="%s"] .badge[data-status="COMPLETED"]`, ok)),
		shot("dashboard-runs.png"),
		// A filter keeps the failed run only.
		chromedp.Navigate(srv.URL+"/#/?status=FAILED"),
		chromedp.WaitReady(`#f-status option[value="FAILED"]:checked`),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-run="%s"]`, id)),
		chromedp.WaitNotPresent(fmt.Sprintf(`tr[data-run="%s"]`, ok)),
		// The failed run: the failed step marked, its error shown as text.
		chromedp.Click(fmt.Sprintf(`tr[data-run="%s"] a`, id)),
		chromedp.WaitVisible(`#dag .node[data-step="second"][data-state="FAILED"]`),
		chromedp.WaitVisible(`#dag .node[data-step="first"][data-state="COMPLETED"]`),
		chromedp.WaitVisible(`#dag path.edge[data-from="first"][data-to="second"]`),
		chromedp.WaitVisible(`#timeline rect[data-step="second"][data-attempt="1"]`),
	))
	errText, err := chromedp.Run(ctx, chromedp.Text(`#run-error`))
	require.NoError(t, err)
	require.Equal(t, "second: <b>broken</b>", errText)
	en.fixed.Store(true) // the fix is deployed
	require.NoError(t, chromedp.Do(ctx,
		shot("dashboard-failed-run.png"),
		// Replay, confirmed in the dialog.
		chromedp.Click(`#replay`),
		chromedp.WaitVisible(`#confirm[open] #confirm-yes`),
		chromedp.Click(`#confirm-yes`),
		chromedp.WaitVisible(`h1 .badge[data-status="COMPLETED"]`),
		chromedp.WaitVisible(`#dag .node[data-step="second"][data-state="COMPLETED"]`),
		chromedp.WaitVisible(`#timeline rect[data-step="second"][data-attempt="1"]`),
		shot("dashboard-replayed-run.png"),
		// The workflows and their DAGs.
		chromedp.Navigate(srv.URL+"/#/workflows"),
		chromedp.WaitVisible(`section[data-workflow="approval"] svg .node[data-step="approved"]`),
		chromedp.WaitVisible(`section[data-workflow="approval"] svg path.edge[data-from="approved"][data-to="record"]`),
		chromedp.WaitVisible(`section[data-workflow="slow"] svg .node[data-step="nap"]`),
		// Hostile text stays text.
		chromedp.Navigate(srv.URL+"/#/runs/"+ok.String()),
		chromedp.WaitVisible(`#dag .node[data-step="shout"]`),
		chromedp.Click(`#dag .node[data-step="shout"]`),
		chromedp.WaitVisible(`#dag .node.selected[data-step="shout"]`),
	))
	page, err := chromedp.Run(ctx, chromedp.Text(`main`))
	require.NoError(t, err)
	require.Contains(t, page, `"name": "<img src=x onerror=alert(1)>"`)
	require.Contains(t, page, `"HELLO <IMG SRC=X ONERROR=ALERT(1)>"`)
	imgs, err := chromedp.Run(ctx, chromedp.Nodes(`main img`, chromedp.AtLeast(0)))
	require.NoError(t, err)
	require.Empty(t, imgs)
	for name, b := range shots {
		require.NoError(t, os.WriteFile(filepath.Join("..", "docs", name), b, 0o644))
	}
	require.Equal(t, durabletype.RunCompleted, en.settle(t, id).Status)
}

// TestDashboardAssets: the dashboard's files are served with a strict
// content security policy, and only when enabled.
func TestDashboardAssets(t *testing.T) {
	t.Parallel()
	en := newEnv(t, memstore.New())
	on := httpapi.New(en.e, httpapi.Options{Logger: quiet, Dashboard: true})
	for _, path := range []string{"/", "/ui/app.js", "/ui/dag.js", "/ui/calls.js", "/ui/style.css"} {
		rec := httptest.NewRecorder()
		on.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		require.Equal(t, http.StatusOK, rec.Code, path)
		require.Contains(t, rec.Header().Get("Content-Security-Policy"), "script-src 'self'", path)
		require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"), path)
		require.Equal(t, "DENY", rec.Header().Get("X-Frame-Options"), path)
	}
	for _, path := range []string{"/ui/", "/ui/index.html", "/ui/nope.js", "/ui/../httpapi.go"} {
		rec := httptest.NewRecorder()
		on.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		require.NotEqual(t, http.StatusOK, rec.Code, path)
	}
	off := httpapi.New(en.e, httpapi.Options{Logger: quiet})
	rec := httptest.NewRecorder()
	off.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
}

// screenshots takes full-page screenshots into docs/ when
// DURABLE_UPDATE_SCREENSHOTS is set (browsertest.Screenshots).
func screenshots(t *testing.T) func(name string) chromedp.Action[chromedp.Void] {
	t.Helper()
	return browsertest.Screenshots(t, filepath.Join("..", "docs"))
}

// TestDashboardWorkersQueues: the workers page lists the running engine as
// live and leading and warns of the workflow no worker serves; the queues
// page shows that workflow's backlog; the runs list marks its run, and the
// run's page shows the unserved banner.
func TestDashboardWorkersQueues(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	en := newEnv(t, s)
	srv := httptest.NewServer(httpapi.New(en.e, httpapi.Options{Logger: quiet, Dashboard: true}))
	t.Cleanup(srv.Close)
	ws, err := en.e.Workers(context.Background())
	require.NoError(t, err)
	require.Len(t, ws, 1)
	self := ws[0].ID
	done := en.trigger(t, "acme", "greet", map[string]any{"input": map[string]any{"name": "ada"}})
	require.Equal(t, durabletype.RunCompleted, en.settle(t, done).Status)
	sid := en.trigger(t, "acme", "slow", map[string]any{"input": 1})
	orphan := orphanRun(t, s, "acme")

	ctx := browser(t)
	shot := screenshots(t)
	require.NoError(t, chromedp.Do(ctx,
		// The workers: this engine, live and leading; the orphan
		// workflow's warning.
		chromedp.Navigate(srv.URL+"/#/workers"),
		chromedp.WaitVisible(fmt.Sprintf(`#workers tr[data-worker="%s"][data-live="true"][data-leader="true"]`, self)),
		chromedp.WaitVisible(`#unserved-flows .warning[data-workflow="orphan"]`),
		// ... by version: the orphan run's, which no worker serves.
		chromedp.WaitVisible(`#unserved-flows .warning[data-workflow="orphan"][data-version]:not([data-version=""])`),
		shot("dashboard-workers.png"),
	))
	served, err := chromedp.Run(ctx, chromedp.Text(fmt.Sprintf(`#workers tr[data-worker="%s"] td.served`, self)))
	require.NoError(t, err)
	// ... and accepts the legacy version of each (the one releases before
	// fingerprint 2 gave it).
	require.Regexp(t, `^approval@[0-9a-f]{12}, flaky@[0-9a-f]{12}, greet@[0-9a-f]{12}, paid@[0-9a-f]{12}, slow@[0-9a-f]{12}\s+`+
		`accepts approval@[0-9a-f]{12}, flaky@[0-9a-f]{12}, greet@[0-9a-f]{12}, paid@[0-9a-f]{12}, slow@[0-9a-f]{12}$`, served,
		"the worker lists the versions it serves")
	require.NoError(t, chromedp.Do(ctx,
		// The queues: the orphan workflow's queued step, and the totals.
		chromedp.Navigate(srv.URL+"/#/queues"),
		chromedp.WaitVisible(`#queues tr[data-workflow="orphan"][data-tenant="acme"] td[data-col="ready"][data-count="1"]`),
		chromedp.WaitVisible(`#queues tr[data-workflow="orphan"][data-version]:not([data-version=""]) code.version`),
		chromedp.WaitVisible(`#queues tr[data-workflow="slow"][data-tenant="acme"] td[data-col="waiting"][data-count="1"]`),
		chromedp.WaitVisible(`#queue-totals td[data-col="ready"][data-count="1"]`),
		chromedp.WaitVisible(`#run-counts tr[data-workflow="greet"][data-tenant="acme"] td[data-col="COMPLETED"][data-count="1"]`),
		shot("dashboard-queues.png"),
		// The runs list marks the orphan run only.
		chromedp.Navigate(srv.URL+"/#/"),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-run="%s"] .badge.unserved`, orphan)),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-run="%s"]`, sid)),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-run="%s"]`, done)),
	))
	marks, err := chromedp.Run(ctx, chromedp.Nodes(`#runs .badge.unserved`, chromedp.AtLeast(0)))
	require.NoError(t, err)
	require.Len(t, marks, 1)
	require.NoError(t, chromedp.Do(ctx,
		// The orphan run's page: the banner.
		chromedp.Click(fmt.Sprintf(`tr[data-run="%s"] a`, orphan)),
		chromedp.WaitVisible(`#unserved[role="alert"]`),
		shot("dashboard-unserved-run.png"),
		// A served run: no banner.
		chromedp.Navigate(srv.URL+"/#/runs/"+sid.String()),
		chromedp.WaitVisible(`#dag .node[data-step="nap"]`),
		chromedp.WaitNotPresent(`#unserved`),
		// Its timeline draws the sleep, which holds no worker, apart from
		// attempts.
		chromedp.WaitVisible(`#timeline rect.gap.sleeping[data-step="nap"]`),
	))
	banner, err := chromedp.Run(ctx, chromedp.Text(`main`))
	require.NoError(t, err)
	require.NotContains(t, banner, "No live worker serves")
	require.NotRegexp(t, `(?m)^\s*null\s*$`, banner, "the banner's absence is not shown as text")
}

// TestDashboardStatusesFromAPI: the dashboard lists no run status of its
// own: its status filter, the columns of its run counts and the colours of
// its badges come from GET /api/v1/statuses, and "in flight" filters by
// meaning.
func TestDashboardStatusesFromAPI(t *testing.T) {
	t.Parallel()
	en := newEnv(t, memstore.New())
	srv := httptest.NewServer(httpapi.New(en.e, httpapi.Options{Logger: quiet, Dashboard: true}))
	t.Cleanup(srv.Close)
	failed := en.trigger(t, "a", "flaky", map[string]any{"input": 1})
	en.settle(t, failed)
	napping := en.trigger(t, "a", "slow", map[string]any{"input": 1})

	var want []string
	for _, s := range durabletype.RunStatuses {
		want = append(want, string(s))
	}
	ctx := browser(t)
	class := func(id fmt.Stringer) string {
		t.Helper()
		a, err := chromedp.Run(ctx, chromedp.AttributeValue(fmt.Sprintf(`tr[data-run="%s"] .badge[data-status]`, id), "class"))
		require.NoError(t, err)
		return a.Value
	}
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/#/?status=in_flight"),
		chromedp.WaitReady(`#f-status option[value="in_flight"]:checked`),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-run="%s"]`, napping)),
		chromedp.WaitNotPresent(fmt.Sprintf(`tr[data-run="%s"]`, failed)),
	))
	options, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#f-status option")].map((o) => o.value)`))
	require.NoError(t, err)
	require.Equal(t, append(append([]string{""}, want...), "in_flight", "settled", "unsuccessful"), options)
	require.Equal(t, "badge in-flight", class(napping))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/#/?status=FAILED"),
		chromedp.WaitVisible(fmt.Sprintf(`tr[data-run="%s"]`, failed)),
	))
	require.Equal(t, "badge unsuccessful", class(failed))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/#/queues"),
		chromedp.WaitVisible(`#run-counts tr[data-workflow="slow"]`),
	))
	columns, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("th[data-status]")].map((th) => th.dataset.status)`))
	require.NoError(t, err)
	require.Equal(t, want, columns)
}
