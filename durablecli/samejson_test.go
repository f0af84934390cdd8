package durablecli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/httpapi"
)

// TestSameJSONAsAPI: for the same data, "runs list --json", "stats
// --json" and "workers --all --json" print the documents that GET
// /api/v1/runs, /api/v1/stats and /api/v1/workers?all=true answer (one
// definition each, in package durablejson): the same fields with the same
// values, but for when they were read ("at") and the ages taken then.
func TestSameJSONAsAPI(t *testing.T) {
	t.Parallel()
	p := newPG(t, true) // no worker at first: the runs wait, unserved
	ctx := context.Background()
	client := p.Client(t)
	set := newFixtures(0)
	for range 3 {
		_, err := set.Noop.RunNoWait(ctx, client, "acme", 0)
		require.NoError(t, err)
	}
	chain, err := set.Chain.RunNoWait(ctx, client, "zed", 0)
	require.NoError(t, err)
	require.NoError(t, client.Cancel(ctx, chain, "not needed"))
	srv := httptest.NewServer(httpapi.New(client, httpapi.Options{}))
	t.Cleanup(srv.Close)

	pairs := []struct {
		args []string
		path string
	}{
		{[]string{"runs", "list", "--json"}, "/api/v1/runs"},
		{[]string{"runs", "list", "--json", "--status", "in_flight", "--tenant", "acme", "--limit", "2"}, "/api/v1/runs?status=in_flight&tenant=acme&limit=2"},
		{[]string{"stats", "--json", "--window", "24h"}, "/api/v1/stats?window=24h"},
		{[]string{"workers", "--json", "--all"}, "/api/v1/workers?all=true"},
	}
	// read decodes what the CLI prints and what the API answers, without
	// the fields that depend on the instant of reading (and a page's
	// cursor: each tool has its own).
	read := func(args []string, path string) (cli, api any) {
		code, out, errOut := runCLI(t, p.Flags(args...)...)
		require.Equal(t, 0, code, errOut)
		require.NoError(t, json.Unmarshal([]byte(out), &cli), out)
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.NoError(t, json.Unmarshal(body, &api), string(body))
		return instantless(cli), instantless(api)
	}
	same := func(stage string) {
		for _, pr := range pairs {
			var cli, api any
			// A live worker refreshes its record while the two are read:
			// read them again until they are of one moment.
			require.Eventually(t, func() bool {
				cli, api = read(pr.args, pr.path)
				return equalJSON(cli, api)
			}, 20*time.Second, 50*time.Millisecond, "%s: %v and GET %s print different documents:\nCLI: %v\nAPI: %v", stage, pr.args, pr.path, cli, api)
		}
	}
	same("runs waiting, unserved")
	cli, _ := read([]string{"runs", "list", "--json"}, "/api/v1/runs")
	require.Contains(t, mustJSON(t, cli), `"unserved":true`, "the runs of a version no live worker serves")
	require.Contains(t, mustJSON(t, cli), `"finished_at":null`)

	// With a live worker: the runs complete, the worker is listed.
	p.StartWorker(t)
	require.Eventually(t, func() bool {
		page, err := client.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Tenant: "acme", Statuses: []durable.RunStatus{durable.RunCompleted}}})
		require.NoError(t, err)
		return len(page.Runs) == 3
	}, 30*time.Second, 20*time.Millisecond)
	same("runs settled, a worker live")
	cli, _ = read([]string{"workers", "--json", "--all"}, "/api/v1/workers?all=true")
	require.Contains(t, mustJSON(t, cli), `"dead_after":"5s","dead_after_s":5`)
}

// instantless drops from a decoded document the fields that depend on
// when it was read: "at" and the ages ("..._age_s").
func instantless(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k := range x {
			if k == "at" || strings.HasSuffix(k, "_age_s") {
				delete(x, k)
				continue
			}
			x[k] = instantless(x[k])
		}
	case []any:
		for i := range x {
			x[i] = instantless(x[i])
		}
	}
	return v
}

// equalJSON reports whether two decoded documents are equal.
func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
