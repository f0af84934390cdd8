package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/memstore"
)

// TestDashboardSendWaited signs in with a token scoped to tenant acme,
// sends from the run pages the event one run waits for and the signal
// another waits for, each confirmed in a dialog that checks the JSON
// payload first, and sees both runs complete with those payloads; a signal
// to a run cancelled while the dialog was open is refused, and the page
// shows the API's reason.
func TestDashboardSendWaited(t *testing.T) {
	t.Parallel()
	en := newEngineEnv(t, memstore.New(), waitingFlows()...)
	// Tokens: one scoped to tenant acme, one for every tenant.
	tenants := map[string]string{"acme-token": "acme", "ops-token": "*"}
	bearer := func(r *http.Request) (string, bool) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		tenant, known := tenants[tok]
		return tenant, ok && known
	}
	srv := httptest.NewServer(httpapi.New(en.e, httpapi.Options{Logger: quiet, Dashboard: true,
		Authenticate: func(r *http.Request) error {
			if _, ok := bearer(r); !ok {
				return errors.New("unknown token")
			}
			return nil
		},
		Tenant: func(r *http.Request) (string, bool, error) {
			tenant, _ := bearer(r)
			return tenant, tenant == "*", nil
		},
	}))
	t.Cleanup(srv.Close)
	paid := en.trigger(t, "acme", "paid-order", map[string]any{"input": "7"})
	gate := en.trigger(t, "acme", "gate", map[string]any{"input": "po-1"})
	late := en.trigger(t, "acme", "gate", map[string]any{"input": "po-2"})

	// The page asks for a token (the API answered 401) and the refused
	// signal answers 409: expected failed loads.
	ctx := browserExpecting(t, "status of 401", "status of 409")
	shot := screenshots(t)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/#/runs/"+paid.String()),
		chromedp.WaitVisible(`#login #token`),
		chromedp.SendKeys(`#token`, "acme-token"),
		chromedp.Click(`#login button[type="submit"]`),
		// The event step, once it waits, has its button.
		chromedp.WaitVisible(`#waits li[data-step="payment"][data-for="event"] button.send`),
		chromedp.Click(`#waits button.send[data-step="payment"]`),
		chromedp.WaitVisible(`#confirm[open] #send-payload`),
	))
	label, err := chromedp.Run(ctx, chromedp.AttributeValue(`#waits button.send[data-step="payment"]`, "aria-label"))
	require.NoError(t, err)
	require.Equal(t, `Send the event "paid-7" that step payment waits for`, label.Value)
	question, err := chromedp.Run(ctx, chromedp.Text(`#confirm-text`))
	require.NoError(t, err)
	require.Equal(t, `Send event "paid-7" to tenant acme?`, question)
	payloadLabel, err := chromedp.Run(ctx, chromedp.Text(`label[for="send-payload"]`))
	require.NoError(t, err)
	require.Contains(t, payloadLabel, "payload (JSON")

	// A payload that is not JSON is refused in the dialog, which stays
	// open; a JSON one is sent, and the run completes with it.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(`#send-payload`, "{oops"),
		chromedp.Click(`#confirm-yes`),
		chromedp.WaitVisible(`#confirm[open] #confirm-problem`),
	))
	problem, err := chromedp.Run(ctx, chromedp.Text(`#confirm-problem`))
	require.NoError(t, err)
	require.Contains(t, problem, "The payload is not JSON")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`document.getElementById("send-payload").value = ""`),
		chromedp.SendKeys(`#send-payload`, "125"),
		chromedp.WaitNotVisible(`#confirm-problem`), // edited: checked anew
		shot("dashboard-send-event.png"),
		chromedp.Click(`#confirm-yes`),
		chromedp.WaitVisible(`h1 .badge[data-status="COMPLETED"]`),
		chromedp.WaitVisible(`#action-notice[role="status"]`),
		chromedp.WaitNotPresent(`#waits`),
	))
	notice, err := chromedp.Run(ctx, chromedp.Text(`#action-notice`))
	require.NoError(t, err)
	require.Equal(t, `Event "paid-7" sent to tenant acme: delivered to 1 waiting step.`, notice)
	res := en.settle(t, paid)
	ship, _ := res.Step("ship")
	require.Equal(t, "125", string(ship.Output))

	// The signal, to the run.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/#/runs/"+gate.String()),
		chromedp.WaitVisible(`#waits li[data-step="approved"][data-for="signal"] button.send`),
		chromedp.Click(`#waits button.send[data-step="approved"]`),
		chromedp.WaitVisible(`#confirm[open] #send-payload`),
	))
	question, err = chromedp.Run(ctx, chromedp.Text(`#confirm-text`))
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf(`Send signal "approve" to run %s?`, gate), question)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(`#send-payload`, `"ada"`),
		chromedp.Click(`#confirm-yes`),
		chromedp.WaitVisible(`h1 .badge[data-status="COMPLETED"]`),
		chromedp.WaitVisible(`#action-notice[role="status"]`),
	))
	res = en.settle(t, gate)
	record, _ := res.Step("record")
	require.Equal(t, `"po-1 approved by ada"`, string(record.Output))

	// A run cancelled while the dialog is open: the API refuses the
	// signal, and the page says why.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/#/runs/"+late.String()),
		chromedp.WaitVisible(`#waits button.send[data-step="approved"]`),
		chromedp.Click(`#waits button.send[data-step="approved"]`),
		chromedp.WaitVisible(`#confirm[open] #send-payload`),
	))
	require.NoError(t, en.e.Cancel(context.Background(), late, "too late"))
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(`#confirm-yes`),
		chromedp.WaitVisible(`#action-notice.error[role="alert"]`),
		chromedp.WaitVisible(`h1 .badge[data-status="CANCELLED"]`),
	))
	notice, err = chromedp.Run(ctx, chromedp.Text(`#action-notice`))
	require.NoError(t, err)
	require.Equal(t, `Signal "approve" not sent: the run has settled`, notice)
	require.Equal(t, durabletype.RunCancelled, en.settle(t, late).Status)
}
