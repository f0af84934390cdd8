package httpapi_test

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/memstore"
)

// wideDAG is a workflow of 40 steps: start, 9 steps after it that all
// lead into join (9 edges enter one box), then a chain of 29 steps: a
// drawing far wider than any window.
func wideDAG() *durable.Workflow[int] {
	wf := durable.NewWorkflow[int]("wide-40")
	start := durable.Step(wf, "start", noop)
	var fans []durable.Parent
	for i := 1; i <= 9; i++ {
		fans = append(fans, durable.Step(wf, fmt.Sprintf("fan-%d", i), noop, durable.After(start)))
	}
	prev := durable.Parent(durable.Step(wf, "join", noop, durable.After(fans...)))
	for i := 1; i <= 29; i++ {
		prev = durable.Step(wf, fmt.Sprintf("c-%02d", i), noop, durable.After(prev))
	}
	return wf
}

// dagPanel is what the page says of the DAG panel of a run's page.
type dagPanel struct {
	Window       float64  `json:"window"`       // window.innerWidth
	Panel        float64  `json:"panel"`        // the scrolling panel's client width
	PanelHeight  float64  `json:"panelHeight"`  // and height
	ScrollWidth  float64  `json:"scrollWidth"`  // what it scrolls over
	ScrollHeight float64  `json:"scrollHeight"` //
	Drawn        float64  `json:"drawn"`        // the drawing's width on screen
	DrawnHeight  float64  `json:"drawnHeight"`  //
	Natural      float64  `json:"natural"`      // the drawing's width at 100%
	Zoom         string   `json:"zoom"`         // the zoom bar's text
	Steps        int      `json:"steps"`
	Outside      []string `json:"outside"` // steps drawn outside the panel's view
	// JoinEnds are the heights of the ends of the edges that enter join,
	// sorted, and JoinTop, JoinBottom its box's (user units).
	JoinEnds            []float64 `json:"joinEnds"`
	JoinTop, JoinBottom float64
	JoinLeft            float64   `json:"joinLeft"`
	JoinX               []float64 `json:"joinX"`
}

const measureDAGPanel = `(() => {
  const wrap = document.getElementById("dag-wrap"), svg = document.getElementById("dag");
  const view = wrap.getBoundingClientRect();
  const outside = [...svg.querySelectorAll("g.node")].filter((g) => {
    const r = g.getBoundingClientRect();
    return r.left < view.left - 1 || r.right > view.right + 1 || r.top < view.top - 1 || r.bottom > view.bottom + 1;
  }).map((g) => g.dataset.step);
  const join = svg.querySelector('g.node[data-step="join"] rect').getBBox();
  const ends = [...svg.querySelectorAll('path.edge[data-to="join"]')].map((p) => p.getPointAtLength(p.getTotalLength()));
  return {
    window: window.innerWidth, panel: wrap.clientWidth, panelHeight: wrap.clientHeight,
    scrollWidth: wrap.scrollWidth, scrollHeight: wrap.scrollHeight,
    drawn: svg.getBoundingClientRect().width, drawnHeight: svg.getBoundingClientRect().height,
    natural: svg.viewBox.baseVal.width, zoom: document.getElementById("dag-zoom").textContent,
    steps: svg.querySelectorAll("g.node").length, outside,
    joinEnds: ends.map((p) => p.y).sort((a, b) => a - b), JoinTop: join.y, JoinBottom: join.y + join.height,
    joinLeft: join.x, joinX: ends.map((p) => p.x),
  };
})()`

// TestDashboardDAGPanel: at a wide window the DAG panel takes the window's
// width; a 40-step DAG wider than the window scrolls at 100%, and "Fit"
// shows every step in the panel, a zoom the page keeps when it draws the
// run again; the 9 edges that enter one box end apart on its side, so
// their arrowheads do not pile up. The page logs no error (browser).
func TestDashboardDAGPanel(t *testing.T) {
	t.Parallel()
	en := newEngineEnv(t, memstore.New(), wideDAG())
	srv := httptest.NewServer(httpapi.New(en.e, httpapi.Options{Logger: quiet, Dashboard: true}))
	t.Cleanup(srv.Close)
	id := en.trigger(t, "acme", "wide-40", map[string]any{"input": 1})
	require.Equal(t, durabletype.RunCompleted, en.settle(t, id).Status)

	ctx := browser(t)
	measure := func() dagPanel {
		t.Helper()
		m, err := chromedp.Run(ctx, chromedp.Evaluate[dagPanel](measureDAGPanel))
		require.NoError(t, err)
		return m
	}
	done := `#dag .node[data-step="c-29"][data-state="COMPLETED"]`
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(2300, 1200),
		chromedp.Navigate(srv.URL+"/#/runs/"+id.String()),
		chromedp.WaitVisible(done),
	))
	m := measure()
	require.Equal(t, 40, m.Steps)
	require.Equal(t, float64(2300), m.Window)
	require.Greater(t, m.Panel, m.Window-80, "the panel takes the window's width: %+v", m)
	// Drawn first, a DAG wider than the panel fits: no step cut off.
	require.Regexp(t, `^\d+% \(fit\)$`, m.Zoom)
	require.Empty(t, m.Outside, "the first drawing fits: %+v", m)
	require.Less(t, m.Drawn, m.Natural/2)

	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#dag-actual`)))
	m = measure()
	require.Equal(t, "100%", m.Zoom)
	require.InDelta(t, m.Natural, m.Drawn, 1, "100%%: %+v", m)
	require.Greater(t, m.ScrollWidth, m.Panel+1000, "at 100%% the drawing scrolls: %+v", m)
	require.NotEmpty(t, m.Outside)

	// The 9 edges into join end on its left side, at least an arrowhead
	// apart, within the box.
	require.Len(t, m.JoinEnds, 9)
	for k, x := range m.JoinX {
		require.InDelta(t, m.JoinLeft, x, 0.5, "edge %d ends on join's left side", k)
	}
	require.Greater(t, m.JoinEnds[0], m.JoinTop)
	require.Less(t, m.JoinEnds[8], m.JoinBottom)
	for k := 1; k < len(m.JoinEnds); k++ {
		require.GreaterOrEqual(t, m.JoinEnds[k]-m.JoinEnds[k-1], 11.0, "edge ends into join %v", m.JoinEnds)
	}

	// Fit: every step in view, nothing to scroll.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#dag-fit`)))
	m = measure()
	require.Empty(t, m.Outside, "fit shows every step: %+v", m)
	require.LessOrEqual(t, m.ScrollWidth, m.Panel, "%+v", m)
	require.LessOrEqual(t, m.ScrollHeight, m.PanelHeight, "%+v", m)
	require.Less(t, m.Drawn, m.Natural/2)
	require.Greater(t, m.Drawn, m.Panel-40, "fit fills the panel's width: %+v", m)
	require.Regexp(t, `^\d+% \(fit\)$`, m.Zoom)
	fitted := m.Drawn

	// Zoom in; drawn again (another visit of the page), it keeps its zoom.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#dag-in`)))
	m = measure()
	require.InDelta(t, fitted*1.25, m.Drawn, 3)
	require.NotContains(t, m.Zoom, "fit")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/#/"),
		chromedp.WaitVisible(`#runs tr[data-run="`+id.String()+`"]`),
		chromedp.Navigate(srv.URL+"/#/runs/"+id.String()),
		chromedp.WaitVisible(done),
	))
	m = measure()
	require.InDelta(t, fitted*1.25, m.Drawn, 3)

	// Back to 100%.
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#dag-actual`)))
	m = measure()
	require.InDelta(t, m.Natural, m.Drawn, 1)
	require.Equal(t, "100%", m.Zoom)
}
