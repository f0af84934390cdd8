package httpapi_test

import (
	"context"
	"fmt"
	"net/http/httptest"
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

// TestDashboardVersions: the server serves versions 3 and 2 of workflow
// ship and both versions of gated; a build that is gone left runs of ship
// 1 and of workflow legacy, which no live worker serves. The runs list
// shows each run's version and filters by it; the page of a run of ship 1
// names its version and says how to move it; the workflows page lists
// every workflow with its versions, runs in flight, workers and an
// UNSERVED mark, draws the DAG of the version picked, and draws legacy's
// from its runs; a run moved from gated 1 to 2 draws its retired step
// dashed.
func TestDashboardVersions(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	g1, g2 := gatedDefs()
	en := newEngineEnv(t, s, shipDef("3", "pack", "weigh"), shipDef("2", "pack", "label", "notify"), g1, g2)
	srv := httptest.NewServer(httpapi.New(en.e, httpapi.Options{Logger: quiet, Dashboard: true}))
	t.Cleanup(srv.Close)
	v1 := shipDef("1", "pack", "label")
	a1 := startClient(t, s, v1, "acme", "a1")
	startClient(t, s, v1, "acme", "a2")
	lg := startClient(t, s, legacyDef(), "acme", 7)
	cur := en.trigger(t, "acme", "ship", map[string]any{"input": "c"})
	require.Equal(t, durabletype.RunCompleted, en.settle(t, cur).Status)

	// A run of gated 1 moved to 2 while it waits for its signal: legacy,
	// which it ran, is retired.
	ctx := context.Background()
	st, err := g1.Start(ctx, en.e, "acme", "x")
	require.NoError(t, err)
	moved := st.RunID
	require.Eventually(t, func() bool {
		res, err := en.e.Get(ctx, moved)
		require.NoError(t, err)
		gate, _ := res.Step("gate")
		legacy, _ := res.Step("legacy")
		return gate.State == durabletype.TaskWaiting && legacy.State == durabletype.TaskCompleted
	}, 20*time.Second, 20*time.Millisecond)
	up, err := en.e.UpgradeRuns(ctx, "gated", "1", "2", durable.UpgradeOptions{})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{moved}, up.Moved)
	require.NoError(t, en.e.Signal(ctx, moved, "go", "ok"))
	require.Equal(t, durabletype.RunCompleted, en.settle(t, moved).Status)

	row := func(id uuid.UUID) string { return fmt.Sprintf(`#runs tr[data-run="%s"]`, id) }
	ship := func(version string) string {
		return fmt.Sprintf(`section[data-workflow="ship"] tr[data-version=%q]`, version)
	}
	b := browser(t)
	shot := screenshots(t)
	require.NoError(t, chromedp.Do(b,
		// The runs list: each run's version; the runs of version 1 are
		// unserved.
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(row(a1)+` code.version[data-version="1"]`),
		chromedp.WaitVisible(row(a1)+` .badge.unserved`),
		chromedp.WaitVisible(row(cur)+` code.version[data-version="2"]`),
		chromedp.WaitVisible(row(lg)+` .badge.unserved`),
		// Filtered by version.
		chromedp.Navigate(srv.URL+"/#/?workflow=ship&version=1"),
		chromedp.WaitReady(`#f-version option[value="1"]:checked`),
		chromedp.WaitReady(`#f-version option[value="3"]`),
		chromedp.WaitVisible(row(a1)),
		chromedp.WaitNotPresent(row(cur)),
		chromedp.WaitNotPresent(row(lg)),
		// The page of a run of version 1.
		chromedp.Click(row(a1)+` a`),
		chromedp.WaitVisible(`#unserved[data-version="1"] #upgrade-cmd`),
		chromedp.WaitVisible(`#dag .node[data-step="pack"][data-state="QUEUED"]`),
		shot("dashboard-unserved-version.png"),
	))
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(b, chromedp.Text(sel))
		require.NoError(t, err)
		return s
	}
	require.Equal(t, "1", text(`#run-version`))
	require.Equal(t, "durable runs upgrade --workflow ship --from 1 --to 2 --dry-run", text(`#upgrade-cmd`))
	require.Contains(t, text(`#unserved`), "No live worker serves version 1 of workflow ship")

	require.NoError(t, chromedp.Do(b,
		// The workflows: ship's versions, the one this server starts drawn.
		chromedp.Navigate(srv.URL+"/#/workflows"),
		chromedp.WaitVisible(ship("1")+`[data-unserved="true"] .badge.unserved`),
		chromedp.WaitVisible(ship("2")+`[data-unserved="false"] .badge.newest`),
		chromedp.WaitVisible(ship("2")+` button.draw[aria-pressed="true"]`),
		chromedp.WaitVisible(`section[data-workflow="ship"] svg[data-version="2"] .node[data-step="notify"]`),
		chromedp.WaitVisible(`section[data-workflow="ship"] h2 .badge.unserved`),
		// legacy, which this server does not register, drawn from its runs.
		chromedp.WaitVisible(`section[data-workflow="legacy"][data-registered="false"] tr[data-unserved="true"]`),
		chromedp.WaitVisible(`section[data-workflow="legacy"] svg .node[data-step="second"]`),
		chromedp.WaitVisible(`section[data-workflow="legacy"] svg path.edge[data-from="first"][data-to="second"]`),
		shot("dashboard-versions.png"),
	))
	require.Equal(t, "2", text(ship("1")+` td[data-col="in_flight"]`))
	require.Equal(t, "2", text(ship("1")+` td[data-col="ready"]`))
	require.Equal(t, "—", text(ship("1")+` td.workers`))
	require.Equal(t, en.e.WorkerID(), text(ship("2")+` td.workers`))
	require.Equal(t, "0", text(ship("2")+` td[data-col="in_flight"]`))
	unserved, err := chromedp.Run(b, chromedp.Nodes(`section[data-workflow="ship"] tbody .badge.unserved`, chromedp.AtLeast(0)))
	require.NoError(t, err)
	require.Len(t, unserved, 1, "only version 1 is unserved")

	// Picking a version draws its DAG.
	require.NoError(t, chromedp.Do(b,
		chromedp.Click(ship("3")+` button.draw`),
		chromedp.WaitVisible(`section[data-workflow="ship"] svg[data-version="3"] .node[data-step="weigh"]`),
		chromedp.WaitNotPresent(`section[data-workflow="ship"] svg .node[data-step="label"]`),
		chromedp.WaitVisible(ship("3")+` button.draw[aria-pressed="true"]`),
		chromedp.WaitVisible(ship("2")+` button.draw[aria-pressed="false"]`),
		chromedp.Click(ship("1")+` button.draw`),
		chromedp.WaitVisible(`section[data-workflow="ship"] svg[data-version="1"] .node[data-step="label"]`),
		chromedp.WaitNotPresent(`section[data-workflow="ship"] svg .node[data-step="notify"]`),
		// Its in-flight count lists its runs.
		chromedp.Click(ship("1")+` td[data-col="in_flight"] a`),
		chromedp.WaitReady(`#f-version option[value="1"]:checked`),
		chromedp.WaitVisible(row(a1)),
		chromedp.WaitNotPresent(row(cur)),
	))

	// The moved run: legacy retired, drawn dashed, its edge too.
	require.NoError(t, chromedp.Do(b,
		chromedp.Navigate(srv.URL+"/#/runs/"+moved.String()),
		chromedp.WaitVisible(`#dag .node[data-step="audit"][data-state="COMPLETED"]`),
		chromedp.WaitVisible(`#dag .node.retired[data-step="legacy"][data-retired="true"]`),
		chromedp.WaitVisible(`#dag path.edge.retired[data-from="prep"][data-to="legacy"]`),
		chromedp.WaitVisible(`#dag .node[data-step="prep"][data-retired="false"]`),
		chromedp.Click(`#dag .node[data-step="legacy"]`),
		chromedp.WaitVisible(`#step-detail`),
		shot("dashboard-retired-step.png"),
	))
	require.Equal(t, "2", text(`#run-version`))
	look, err := chromedp.Run(b, chromedp.Evaluate[map[string]string](`(() => {
	  const style = (sel) => getComputedStyle(document.querySelector(sel));
	  return {
	    retiredDash: style('#dag .node[data-step="legacy"] rect').strokeDasharray,
	    keptDash: style('#dag .node[data-step="prep"] rect').strokeDasharray,
	    edgeDash: style('#dag path.edge[data-from="prep"][data-to="legacy"]').strokeDasharray,
	    title: document.querySelector('#dag .node[data-step="legacy"] title').textContent,
	    sub: document.querySelector('#dag .node[data-step="legacy"] text.sub').textContent,
	  };
	})()`))
	require.NoError(t, err)
	require.NotEqual(t, "none", look["retiredDash"], "a retired step is dashed")
	require.Equal(t, "none", look["keptDash"], "a step the run runs is not")
	require.NotEqual(t, "none", look["edgeDash"])
	require.Contains(t, look["title"], "retired")
	require.Equal(t, "completed · retired", look["sub"])
	require.Contains(t, text(`#step-detail`), "kept for its record")
}
