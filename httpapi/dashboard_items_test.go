package httpapi_test

import (
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/memstore"
)

// TestDashboardDAGItemCount: a map step's box in a run's DAG counts its
// items in words that agree with the number: "1 item", "2 items"
// (browser).
func TestDashboardDAGItemCount(t *testing.T) {
	t.Parallel()
	wf := durable.NewWorkflow[[]int]("item-count")
	durable.MapInput(wf, "lines", func(in []int) []int { return in },
		func(_ durable.Context, n int) (int, error) { return n, nil })
	en := newEngineEnv(t, memstore.New(), wf)
	srv := httptest.NewServer(httpapi.New(en.e, httpapi.Options{Logger: quiet, Dashboard: true}))
	t.Cleanup(srv.Close)

	for _, c := range []struct {
		input []int
		want  string
	}{{[]int{7}, "completed · 1 item"}, {[]int{7, 8}, "completed · 2 items"}} {
		id := en.trigger(t, "acme", "item-count", map[string]any{"input": c.input})
		require.Equal(t, durabletype.RunCompleted, en.settle(t, id).Status)
		ctx := browser(t) // a page of its own: the box of the previous run's page matches too
		box := `#dag .node[data-step="lines"][data-state="COMPLETED"]`
		require.NoError(t, chromedp.Do(ctx,
			chromedp.Navigate(srv.URL+"/#/runs/"+id.String()),
			chromedp.WaitVisible(box),
		))
		sub, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('`+box+` text.sub').textContent`))
		require.NoError(t, err)
		require.Equal(t, c.want, sub)
		// A DAG that fits the panel is drawn at 100% (a wider one fits:
		// TestDashboardDAGPanel).
		zoom, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("dag-zoom").textContent`))
		require.NoError(t, err)
		require.Equal(t, "100%", zoom)
	}
}
