package durablecli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

func TestWorkersCommand(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	ctx := context.Background()

	code, out, errOut := runCLI(t, p.Flags("workers")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "no live workers\n", out)
	require.Empty(t, errOut)

	// A queued run of a workflow no live worker serves is flagged, by
	// "workers" and by "runs show".
	set := newFixtures(0)
	id, err := set.Noop.RunNoWait(ctx, p.Client(t), "acme", 0)
	require.NoError(t, err)
	code, out, errOut = runCLI(t, p.Flags("workers")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "no live workers\n", out)
	v := set.Noop.Version()
	require.Equal(t, "warning: version "+v+" of workflow bench-noop has 1 queued step, but no live worker serves or accepts it: "+
		"start a worker of that version, or move its runs: durable runs upgrade --workflow bench-noop --from "+v+" --to VERSION\n", errOut)
	code, out, errOut = runCLI(t, p.Flags("runs", "show", id.String())...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "\nwarning   no live worker serves or accepts version \""+v+"\" of workflow \"bench-noop\": its steps wait until one starts (see durable workflows)\n"+
		"fix       start a worker of version \""+v+"\", or move the run: durable runs upgrade --workflow bench-noop --from "+v+" --to VERSION --run "+id.String()+"\n")
	code, out, errOut = runCLI(t, p.Flags("runs", "show", "--json", id.String())...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"unserved":true`)
	require.NotContains(t, out, `"upgrade_to"`, "no other version is served")

	// A worker that died (its record not refreshed for an hour) is listed
	// with --all only.
	require.NoError(t, p.Store.RegisterWorker(ctx, &store.RegisterWorkerParams{
		Now: time.Now().Add(-time.Hour), Started: true,
		Worker: store.Worker{ID: "dead-1", Host: "gone", Workflows: []string{"bench-noop"}, Concurrency: 4, DeadAfter: 30 * time.Second},
	}))

	// A live worker serves it: the run completes, nothing is flagged.
	w := p.StartWorker(t)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := w.Wait(wctx, id)
	require.NoError(t, err)
	require.Equal(t, durabletype.RunCompleted, res.Status)
	code, out, errOut = runCLI(t, p.Flags("runs", "show", id.String())...)
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "warning")

	var lines []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, out, errOut = runCLI(t, p.Flags("workers")...)
		require.Equal(t, 0, code, errOut)
		require.Empty(t, errOut)
		lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		require.Len(t, lines, 2, out)
		if strings.Contains(lines[1], " yes") {
			break // it leads
		}
		require.True(t, time.Now().Before(deadline), "the worker does not lead:\n%s", out)
		time.Sleep(20 * time.Millisecond)
	}
	requireAligned(t, lines, "HOST", "VERSION", "STARTED", "LAST SEEN", "WORKFLOWS", "CONCURRENCY", "IN FLIGHT", "LEADER")
	require.True(t, strings.HasPrefix(lines[1], w.WorkerID()+" "), lines[1])
	// Steps in flight are as of the record's last refresh, which may have
	// caught the run's step (TestWorkers checks the count itself).
	require.Regexp(t, `\d\.\d{3}s ago +[a-z-]+@[0-9a-f]{12},[a-z-]+@[0-9a-f]{12},[a-z-]+@[0-9a-f]{12} \(\+\d+\) +100 +[01] +yes$`, lines[1],
		"the versions served")

	code, out, errOut = runCLI(t, p.Flags("workers", "--all")...)
	require.Equal(t, 0, code, errOut)
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 3, out)
	requireAligned(t, lines, "HOST", "LEADER", "LIVE")
	require.Regexp(t, `^dead-1 +gone +- +.* +bench-noop +4 +0 +no +no$`, lines[1], "a worker older than versions lists bare workflows")
	require.Regexp(t, ` yes +yes$`, lines[2])

	code, out, errOut = runCLI(t, p.Flags("workers", "--json", "--all")...)
	require.Equal(t, 0, code, errOut)
	var js durablejson.Workers
	require.NoError(t, json.Unmarshal([]byte(out), &js))
	require.Len(t, js.Workers, 2)
	require.Empty(t, js.Unserved)
	dead, live := js.Workers[0], js.Workers[1]
	require.Equal(t, "dead-1", dead.ID)
	require.False(t, dead.Live)
	require.InDelta(t, time.Hour.Seconds(), dead.LastSeenAge, 60)
	require.Equal(t, 30.0, dead.DeadAfterSeconds)
	require.Equal(t, "30s", dead.DeadAfter)
	require.Equal(t, w.WorkerID(), live.ID)
	require.True(t, live.Live)
	require.True(t, live.Leader)
	require.Contains(t, live.Workflows, "bench-noop")
	require.Contains(t, live.Versions, "bench-noop@"+v)
	// It accepts only the legacy version of each workflow it serves (the
	// one releases before fingerprint 2 gave it).
	require.Len(t, live.Accepts, len(live.Versions))
	require.NotContains(t, live.Accepts, "bench-noop@"+v)
	require.Empty(t, dead.Versions)
	require.Equal(t, 5.0, live.DeadAfterSeconds)

	code, _, errOut = runCLI(t, "workers", "--database-url", "", "--schema", p.Schema)
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--database-url (or $DURABLE_DATABASE_URL) is required")
	code, _, _ = runCLI(t, p.Flags("workers", "extra")...)
	require.Equal(t, exitUsage, code)
}

func TestWorkersHelp(t *testing.T) {
	t.Parallel()
	code, _, errOut := runCLI(t, "workers", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "Usage: durable workers --database-url URL")
	require.Contains(t, errOut, "-all")
	code, out, _ := runCLI(t, "help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "\n  workers   the live workers")
}
