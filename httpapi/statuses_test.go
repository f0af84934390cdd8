package httpapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/memstore"
)

// TestStatuses: GET /api/v1/statuses lists exactly durabletype.RunStatuses,
// in their order, each with what durabletype's predicates say it means,
// and the status filter's groups with the statuses of their meaning.
func TestStatuses(t *testing.T) {
	t.Parallel()
	en := newEnv(t, memstore.New())
	r := en.do(t, "acme", "GET", "/api/v1/statuses", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var got durablejson.Statuses
	require.NoError(t, json.Unmarshal(r.body, &got))
	var listed []durabletype.RunStatus
	for _, m := range got.Statuses {
		listed = append(listed, m.Status)
		s := m.Status
		require.Equal(t, [4]bool{s.Settled(), s.InFlight(), s.Active(), s.Unsuccessful()},
			[4]bool{m.Settled, m.InFlight, m.Active, m.Unsuccessful}, "%s", s)
		for _, a := range durabletype.RunActions {
			require.Equal(t, s.Allows(a), slices.Contains(m.Actions, a), "%s allows %s", s, a)
		}
	}
	require.Equal(t, durabletype.RunStatuses, listed)
	groups := map[string][]durabletype.RunStatus{}
	for _, g := range got.Groups {
		groups[g.Name] = g.Statuses
	}
	require.Equal(t, map[string][]durabletype.RunStatus{
		"in_flight":    durabletype.RunStatusesWhere(durabletype.RunStatus.InFlight),
		"settled":      durabletype.RunStatusesWhere(durabletype.RunStatus.Settled),
		"unsuccessful": durabletype.RunStatusesWhere(durabletype.RunStatus.Unsuccessful),
	}, groups)
}

// TestStatusGroupsFilter: status=in_flight lists the runs not settled,
// settled and unsuccessful those of their meaning, in any case and beside
// statuses; an unknown word is a 400.
func TestStatusGroupsFilter(t *testing.T) {
	t.Parallel()
	en := newEnv(t, memstore.New())
	done := en.trigger(t, "acme", "greet", map[string]any{"input": map[string]any{"name": "ada"}})
	failed := en.trigger(t, "acme", "flaky", map[string]any{"input": 1})
	napping := en.trigger(t, "acme", "slow", map[string]any{"input": 1})
	en.settle(t, done)
	en.settle(t, failed)
	listed := func(q string) []uuid.UUID {
		t.Helper()
		r := en.do(t, "acme", "GET", "/api/v1/runs?"+q, nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		var page durablejson.RunList
		require.NoError(t, json.Unmarshal(r.body, &page))
		var ids []uuid.UUID
		for _, run := range page.Runs {
			ids = append(ids, run.ID)
		}
		return ids
	}
	require.Equal(t, []uuid.UUID{napping}, listed("status=in_flight"))
	require.Equal(t, []uuid.UUID{napping}, listed("status=IN_FLIGHT"))
	require.Equal(t, []uuid.UUID{failed, done}, listed("status=settled"))
	require.Equal(t, []uuid.UUID{failed}, listed("status=unsuccessful"))
	require.Equal(t, []uuid.UUID{napping, done}, listed("status=in_flight,completed"))
	require.Equal(t, []uuid.UUID{napping, failed}, listed("status=unsuccessful&status=in_flight"))
	requireProblem(t, en.do(t, "acme", "GET", "/api/v1/runs?status=paused", nil), http.StatusBadRequest, "invalid_filter")
}
