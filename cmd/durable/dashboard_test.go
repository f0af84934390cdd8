package main

// The dashboard that "durable serve" shows draws the built-in workflows'
// DAGs, among others, without an edge through a step's box.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/cmd/durable/internal/demo"
	"github.com/effectivelabs/durable/cmd/durable/internal/workloads"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/internal/tools/browsertest"
	"github.com/effectivelabs/durable/internal/tools/clitest"
	"github.com/effectivelabs/durable/memstore"
)

func noop(durable.Context, int) (struct{}, error) { return struct{}{}, nil }

// randomDAG defines a workflow of n no-op steps whose parents are drawn at
// random from a fixed seed: one or two among the few steps before (so the
// DAG is deep), and now and then one from far back (a long skip edge). It
// returns the workflow and how many of its edges span three columns or
// more when columns are the longest path from a root.
func randomDAG(name string, n int, seed uint64) (*durable.Workflow[int], int) {
	r := rand.New(rand.NewPCG(seed, seed))
	wf := durable.NewWorkflow[int](name)
	refs := make([]durable.Parent, n)
	depth := make([]int, n)
	long := 0
	for i := range n {
		var ps []int
		add := func(p int) {
			if !slices.Contains(ps, p) {
				ps = append(ps, p)
			}
		}
		if i > 0 && i != n/3 { // two roots
			for range 1 + r.IntN(2) {
				add(max(0, i-3) + r.IntN(min(i, 3)))
			}
			if i >= 8 && r.IntN(2) == 0 {
				add(r.IntN(i - 6))
			}
		}
		var after []durable.Parent
		for _, p := range ps {
			after = append(after, refs[p])
			depth[i] = max(depth[i], depth[p]+1)
		}
		for _, p := range ps {
			if depth[i]-depth[p] >= 3 {
				long++
			}
		}
		refs[i] = durable.Step(wf, fmt.Sprintf("step-%02d", i), noop, durable.After(after...))
	}
	return wf, long
}

// signup is the workflow of the report that the DAG misled: provision and
// charge follow account, settle follows charge, activate follows provision
// and settle. Drawn by longest path with one curve per edge, provision →
// activate went straight through settle.
func signup() *durable.Workflow[int] {
	wf := durable.NewWorkflow[int]("signup")
	account := durable.Step(wf, "account", noop)
	provision := durable.Step(wf, "provision", noop, durable.After(account))
	charge := durable.Step(wf, "charge", noop, durable.After(account))
	settle := durable.Step(wf, "settle", noop, durable.After(charge))
	durable.Step(wf, "activate", noop, durable.After(provision, settle))
	return wf
}

// edgesThroughBoxes is evaluated in the page: for every DAG drawn, it
// samples each edge's path every 2 units of its length and reports the
// points inside the box (2 units of margin) of a step that is not one of
// the edge's ends. It returns, per drawing, its edges and steps and those
// findings.
const edgesThroughBoxes = `(() => {
  const M = 2;
  return [...document.querySelectorAll("svg#dag, svg[id^='dag-']")].map((svg) => {
    const boxes = [...svg.querySelectorAll("g.node")].map((g) => {
      const b = g.querySelector("rect").getBBox();
      return { step: g.dataset.step, x0: b.x - M, y0: b.y - M, x1: b.x + b.width + M, y1: b.y + b.height + M };
    });
    const edges = [...svg.querySelectorAll("path.edge")];
    const through = [];
    for (const p of edges) {
      const len = p.getTotalLength();
      const steps = Math.max(10, Math.ceil(len / 2));
      const hit = new Set();
      for (let k = 0; k <= steps; k++) {
        const pt = p.getPointAtLength(len * k / steps);
        for (const b of boxes) {
          if (b.step === p.dataset.from || b.step === p.dataset.to || hit.has(b.step)) continue;
          if (pt.x > b.x0 && pt.x < b.x1 && pt.y > b.y0 && pt.y < b.y1) {
            hit.add(b.step);
            through.push(p.dataset.from + " → " + p.dataset.to + " passes through " + b.step +
              " at (" + pt.x.toFixed(1) + ", " + pt.y.toFixed(1) + ")");
          }
        }
      }
    }
    return {
      id: svg.id,
      edges: edges.map((p) => p.dataset.from + " → " + p.dataset.to).sort(),
      steps: boxes.map((b) => b.step).sort(),
      through,
    };
  });
})()`

// drawing is what edgesThroughBoxes reports of one DAG drawn.
type drawing struct {
	ID      string   `json:"id"`
	Edges   []string `json:"edges"`
	Steps   []string `json:"steps"`
	Through []string `json:"through"`
}

// wantDrawing is what a drawing of wf's steps must show: every step, every
// edge.
func wantDrawing(wf durable.WorkflowInfo) (steps, edges []string) {
	steps, edges = []string{}, []string{}
	for _, s := range wf.Steps {
		steps = append(steps, s.Name)
		for _, p := range s.Parents {
			edges = append(edges, p+" → "+s.Name)
		}
	}
	slices.Sort(steps)
	slices.Sort(edges)
	return steps, edges
}

// TestDashboardDAGEdgesAvoidBoxes draws every built-in workflow (those
// "durable serve" and "durable worker" register), the signup workflow of
// the report and a generated 30-step DAG with long skip edges, on the
// workflows page and on run pages, and fails if any edge passes through the
// box of a step other than its two ends.
func TestDashboardDAGEdgesAvoidBoxes(t *testing.T) {
	t.Parallel()
	set := workloads.New(workloads.Options{FraudWindow: 10 * time.Millisecond})
	generated, long := randomDAG("generated-30", 30, 21)
	require.GreaterOrEqual(t, long, 5, "the generated DAG has long skip edges")
	quiet := clitest.QuietLogger()
	e, err := durable.New(memstore.New(), durable.Config{Logger: quiet, PollInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, e.Register(append(set.All(), signup(), generated)...))
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, e.Stop(ctx))
	})
	srv := httptest.NewServer(httpapi.New(e, httpapi.Options{Logger: quiet, Dashboard: true}))
	t.Cleanup(srv.Close)
	wfs := e.Workflows()
	require.Len(t, wfs, len(set.All())+2)

	check := func(ctx context.Context, want map[string]durable.WorkflowInfo) {
		t.Helper()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]drawing](edgesThroughBoxes))
		require.NoError(t, err)
		require.Len(t, got, len(want))
		for _, d := range got {
			wf, ok := want[d.ID]
			require.True(t, ok, "drawing %s", d.ID)
			steps, edges := wantDrawing(wf)
			require.Equal(t, steps, d.Steps, "the steps of %s", wf.Name)
			require.Equal(t, edges, d.Edges, "the edges of %s", wf.Name)
			// Every drawing is checked before the test stops.
			assert.Empty(t, d.Through, "edges of %s drawn through other steps' boxes", wf.Name)
		}
	}

	ctx := browsertest.New(t)
	shot := browsertest.Screenshots(t, filepath.Join("..", "..", "docs"))
	// The workflows page draws each workflow in the order of the listing.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/#/workflows"),
		chromedp.WaitVisible(`section[data-workflow="generated-30"] svg .node[data-step="step-29"]`),
		shot("dashboard-workflows.png"),
	))
	want := map[string]durable.WorkflowInfo{}
	for i, wf := range wfs {
		want[fmt.Sprintf("dag-%d", i)] = wf
	}
	check(ctx, want)

	// A run's page draws its steps the same way.
	byName := map[string]durable.WorkflowInfo{}
	for _, wf := range wfs {
		byName[wf.Name] = wf
	}
	for _, run := range []struct {
		workflow string
		input    []byte
		shot     string
	}{
		{"generated-30", []byte("1"), ""},
		{demo.WorkflowName, []byte(`{"id":"A-1","customer":"ada","cents":4200,"items":["keyboard"]}`), "dashboard-order-run.png"},
		{"signup", []byte("1"), ""},
	} {
		st, err := e.StartByName(context.Background(), run.workflow, "acme", run.input)
		require.NoError(t, err)
		waitCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		res, err := e.Wait(waitCtx, st.RunID)
		cancel()
		require.NoError(t, err)
		require.Equal(t, durabletype.RunCompleted, res.Status, run.workflow)
		last := byName[run.workflow].Steps[len(byName[run.workflow].Steps)-1].Name
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Navigate(srv.URL+"/#/runs/"+st.RunID.String()),
			chromedp.WaitVisible(fmt.Sprintf(`#dag .node[data-step=%q][data-state="COMPLETED"]`, last)),
		))
		if run.workflow == demo.WorkflowName {
			// reject started, then was skipped: its bar ends there.
			require.NoError(t, chromedp.Do(ctx,
				chromedp.WaitVisible(`#timeline rect.SKIPPED[data-step="reject"][data-attempt="1"]`)))
		}
		if run.shot != "" {
			require.NoError(t, chromedp.Do(ctx, shot(run.shot)))
		}
		check(ctx, map[string]durable.WorkflowInfo{"dag": byName[run.workflow]})
	}
	require.False(t, t.Failed())
}
