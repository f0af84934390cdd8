package durablecli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/httpapi"
)

// TestSameJSONAsAPI: for the same data, the CLI prints the documents that
// the API answers (one definition each, in package durablejson): the same
// fields with the same values, but for when they were read ("at") and the
// ages taken then. The pairs: "runs list --json" and GET /api/v1/runs,
// "stats --json" and /api/v1/stats, "stats --storage --json" and
// /api/v1/storage, "workers --all --json" and
// /api/v1/workers?all=true, "runs show --json" and /api/v1/runs/{id} (a
// run waiting, cancelled, completed, with a map step, with child runs, a
// child run, a run waiting for an event), "runs show --events --json" and
// /api/v1/runs/{id}?include=events, and its event log and
// /api/v1/runs/{id}/events, "workflows --json" and
// /api/v1/workflows, "events send --json" and POST /api/v1/events, and
// "runs upgrade --dry-run --json" and POST
// /api/v1/workflows/{name}/upgrade (runs that would move, a run refused).
func TestSameJSONAsAPI(t *testing.T) {
	t.Parallel()
	p := newPG(t, true) // no worker at first: the runs wait, unserved
	ctx := context.Background()
	client := p.Client(t)
	set := newFixtures(0)
	var noops []uuid.UUID
	for range 3 {
		id, err := set.Noop.RunNoWait(ctx, client, "acme", 0)
		require.NoError(t, err)
		noops = append(noops, id)
	}
	chain, err := set.Chain.RunNoWait(ctx, client, "zed", 0)
	require.NoError(t, err)
	require.NoError(t, client.Cancel(ctx, chain, "not needed"))
	mapped, err := set.Map.RunNoWait(ctx, client, "acme", 3)
	require.NoError(t, err)
	parent, err := set.Parent.RunNoWait(ctx, client, "acme", 0)
	require.NoError(t, err)
	waiter, err := set.Wait.RunNoWait(ctx, client, "acme", 7)
	require.NoError(t, err)
	// Two builds of a workflow: the program (and the server) registers
	// the newer; runs of both wait, unserved.
	old, cur := deployWorkflows()
	for i := range 2 {
		_, err := old.RunNoWait(ctx, client, "acme", i)
		require.NoError(t, err)
	}
	curRun, err := cur.RunNoWait(ctx, client, "acme", 100)
	require.NoError(t, err)

	// The CLI's program and the server's engine register the same
	// workflows.
	cfg := testConfig()
	cfg.Workflows = append(cfg.Workflows, cur)
	server := p.Client(t)
	require.NoError(t, server.Register(cfg.Workflows...))
	srv := httptest.NewServer(httpapi.New(server, httpapi.Options{}))
	t.Cleanup(srv.Close)

	// A pair is a command line and the request that answers the same
	// document; only, when set, keeps that field only of what the CLI
	// prints.
	type pair struct {
		args         []string
		method, path string
		body         string
		only         string
	}
	get := func(path string, args ...string) pair { return pair{args: args, method: "GET", path: path} }
	show := func(id uuid.UUID) pair {
		return get("/api/v1/runs/"+id.String(), "runs", "show", "--json", id.String())
	}
	showEvents := func(id uuid.UUID) pair {
		return get("/api/v1/runs/"+id.String()+"?include=events", "runs", "show", "--json", "--events", id.String())
	}
	events := func(id uuid.UUID) pair {
		return pair{args: []string{"runs", "show", "--json", "--events", id.String()}, method: "GET",
			path: "/api/v1/runs/" + id.String() + "/events", only: "events"}
	}
	upgrade := func(from, to string) pair {
		return pair{args: []string{"runs", "upgrade", "--json", "--dry-run", "--workflow", "cli-deploy", "--from", from, "--to", to},
			method: "POST", path: "/api/v1/workflows/cli-deploy/upgrade", body: `{"from":"` + from + `","to":"` + to + `","dry_run":true}`}
	}
	pairs := []pair{
		get("/api/v1/runs", "runs", "list", "--json"),
		get("/api/v1/runs?status=in_flight&tenant=acme&limit=2", "runs", "list", "--json", "--status", "in_flight", "--tenant", "acme", "--limit", "2"),
		get("/api/v1/stats?window=24h", "stats", "--json", "--window", "24h"),
		get("/api/v1/workers?all=true", "workers", "--json", "--all"),
		get("/api/v1/workflows", "workflows", "--json"),
		show(noops[0]), show(chain), show(mapped), show(parent), show(waiter),
		events(chain), events(mapped), showEvents(chain),
		{args: []string{"events", "send", "--json", "--tenant", "acme", "--key", "nobody-waits"}, method: "POST",
			path: "/api/v1/events", body: `{"tenant":"acme","key":"nobody-waits"}`},
		upgrade(old.Version(), cur.Version()), upgrade(cur.Version(), old.Version()),
	}
	// read decodes what the CLI prints and what the API answers, without
	// the fields that depend on the instant of reading (and a page's
	// cursor: each tool has its own).
	read := func(pr pair) (cli, api any) {
		_, out, errOut := runConfig(cfg, p.Flags(pr.args...)...)
		require.NoError(t, json.Unmarshal([]byte(out), &cli), "%v: %s%s", pr.args, out, errOut)
		if pr.only != "" {
			cli = map[string]any{pr.only: cli.(map[string]any)[pr.only]}
		}
		req, err := http.NewRequest(pr.method, srv.URL+pr.path, strings.NewReader(pr.body))
		require.NoError(t, err)
		if pr.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.NoError(t, json.Unmarshal(body, &api), string(body))
		return instantless(cli), instantless(api)
	}
	same := func(stage string, pairs []pair) {
		for _, pr := range pairs {
			// A live worker refreshes its record while the two are read:
			// read them again until they are of one moment.
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				cli, api := read(pr)
				assert.True(c, equalJSON(cli, api), "%s: %v and %s %s print different documents:\n%s\nCLI: %v\nAPI: %v",
					stage, pr.args, pr.method, pr.path, diffFields(cli, api), cli, api)
			}, 20*time.Second, 50*time.Millisecond)
		}
	}
	same("runs waiting, unserved", pairs)
	// The storage of the tables, while nothing writes to them.
	same("storage", []pair{get("/api/v1/storage", "stats", "--storage", "--json")})
	cli, _ := read(pairs[0])
	require.Contains(t, mustJSON(t, cli), `"unserved":true`, "the runs of a version no live worker serves")
	require.Contains(t, mustJSON(t, cli), `"finished_at":null`)
	cli, _ = read(show(chain))
	require.Equal(t, "not needed", cli.(map[string]any)["error"].(map[string]any)["message"], "an error is an object")
	cli, _ = read(upgrade(cur.Version(), old.Version()))
	require.Contains(t, mustJSON(t, cli), `"refused":[{"code":"incompatible","error":`)
	require.Contains(t, mustJSON(t, cli), curRun.String())

	// With a live worker: the runs complete, the worker is listed.
	p.StartWorker(t)
	for _, id := range append(noops, mapped, parent) {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := client.Wait(wctx, id)
		cancel()
		require.NoError(t, err)
		require.Equal(t, durable.RunCompleted, res.Status)
	}
	page, err := client.ListRuns(ctx, durable.ListOptions{RunFilter: durable.RunFilter{Parent: parent}, Limit: 1})
	require.NoError(t, err)
	require.Len(t, page.Runs, 1)
	same("runs settled, a worker live", append(pairs, show(page.Runs[0].ID), events(parent), showEvents(mapped)))
	cli, _ = read(pairs[3])
	require.Contains(t, mustJSON(t, cli), `"dead_after":"5s","dead_after_s":5`)
	cli, _ = read(show(parent))
	require.Len(t, cli.(map[string]any)["children"], parentChildren)
	cli, _ = read(show(mapped))
	require.Contains(t, mustJSON(t, cli), `"item_counts":{"COMPLETED":3}`)
}

// diffFields names the fields whose values differ between two decoded
// documents, by their paths: "steps.0.error", or a field only one has.
func diffFields(cli, api any) string {
	var out []string
	var walk func(path string, a, b any)
	walk = func(path string, a, b any) {
		ma, oka := a.(map[string]any)
		mb, okb := b.(map[string]any)
		if oka && okb {
			for k, va := range ma {
				vb, ok := mb[k]
				if !ok {
					out = append(out, path+k+": only the CLI prints it")
					continue
				}
				walk(path+k+".", va, vb)
			}
			for k := range mb {
				if _, ok := ma[k]; !ok {
					out = append(out, path+k+": only the API prints it")
				}
			}
			return
		}
		la, oka := a.([]any)
		lb, okb := b.([]any)
		if oka && okb && len(la) == len(lb) {
			for i := range la {
				walk(path+strconv.Itoa(i)+".", la[i], lb[i])
			}
			return
		}
		if !equalJSON(a, b) {
			out = append(out, strings.TrimSuffix(path, ".")+": differs")
		}
	}
	walk("", cli, api)
	return strings.Join(out, "\n")
}

// instantless drops from a decoded document the fields that depend on
// when it was read: "at" and the ages ("..._age_s").
func instantless(v any) any {
	if m, ok := v.(map[string]any); ok {
		delete(m, "at") // when the document was read; an event's "at" is kept
	}
	return ages(v)
}

// ages drops the ages ("..._age_s") from a decoded document.
func ages(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k := range x {
			if strings.HasSuffix(k, "_age_s") {
				delete(x, k)
				continue
			}
			x[k] = ages(x[k])
		}
	case []any:
		for i := range x {
			x[i] = ages(x[i])
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
