package httpapi_test

import (
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/memstore"
)

// TestDashboardStorage: the storage page lists the tables with their dead
// rows and sizes, and flags the table whose dead rows need attention, with
// the verdict above the table.
func TestDashboardStorage(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	en := newEnv(t, s)
	pgtest.DeadTasks(t, pgtest.Pool(t), s.Schema(), 12_000)
	srv := httptest.NewServer(httpapi.New(en.e, httpapi.Options{Logger: quiet, Dashboard: true}))
	t.Cleanup(srv.Close)

	ctx := browser(t)
	shot := screenshots(t)
	// DeadTasks made the statistics show the dead rows; were they late,
	// the page (live) reads them again every 30s.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/#/storage"),
		chromedp.WaitVisible(`#storage tr[data-table="tasks"][data-attention="true"] td[data-col="dead-fraction"]`),
		chromedp.WaitVisible(`#storage tr[data-table="runs"][data-attention="false"] td[data-col="total"]`),
		chromedp.WaitVisible(`#storage-verdicts .warning[data-table="tasks"]`),
		shot("dashboard-storage.png"),
	))
	verdict, err := chromedp.Run(ctx, chromedp.Text(`#storage-verdicts .warning[data-table="tasks"]`))
	require.NoError(t, err)
	require.Contains(t, verdict, "tasks: ")
	require.Contains(t, verdict, "dead rows (100%) and autovacuum is off")
	dead, err := chromedp.Run(ctx, chromedp.Text(`#storage tr[data-table="tasks"] td[data-col="dead-fraction"]`))
	require.NoError(t, err)
	require.Equal(t, "100%", dead)
}

// TestDashboardStorageMemory: on a store without tables the storage page
// says so.
func TestDashboardStorageMemory(t *testing.T) {
	t.Parallel()
	en := newEnv(t, memstore.New())
	srv := httptest.NewServer(httpapi.New(en.e, httpapi.Options{Logger: quiet, Dashboard: true}))
	t.Cleanup(srv.Close)
	ctx := browserExpecting(t, "status of 501")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/#/storage"),
		chromedp.WaitVisible(`main p.error`),
	))
	msg, err := chromedp.Run(ctx, chromedp.Text(`main p.error`))
	require.NoError(t, err)
	require.Equal(t, "the store has no tables to report the storage of", msg)
}
