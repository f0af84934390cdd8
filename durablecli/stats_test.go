package durablecli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
)

func TestStats(t *testing.T) {
	t.Parallel()
	p := newPG(t, true) // no worker: what is queued stays queued
	ctx := context.Background()

	code, out, errOut := runCLI(t, p.Flags("stats")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "queues: no task ready, waiting or running\n\nruns: none in flight, none settled in the last 1h0m0s\n", out)

	client := p.Client(t)
	set := newFixtures(0)
	for range 3 {
		_, err := set.Noop.RunNoWait(ctx, client, "acme", 0)
		require.NoError(t, err)
	}
	var chains []string
	for range 2 {
		id, err := set.Chain.RunNoWait(ctx, client, "zed", 0)
		require.NoError(t, err)
		chains = append(chains, id.String())
	}
	// A settled run: cancelled.
	code, _, errOut = runCLI(t, p.Flags("runs", "cancel", chains[0])...)
	require.Equal(t, 0, code, errOut)

	code, out, errOut = runCLI(t, p.Flags("stats")...)
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut)
	queues := section(t, out, "WORKFLOW ")
	require.Equal(t, "queues (tasks):", strings.Split(out, "\n")[0])
	requireAligned(t, queues, "VERSION", "TENANT", "READY", "WAITING", "RUNNING", "OLDEST READY")
	require.Len(t, queues, 3)
	vChain, vNoop := set.Chain.Version(), set.Noop.Version()
	require.Regexp(t, `^bench-chain +`+vChain+` +zed +1 +0 +0 +\d+\.\d{3}s$`, queues[1])
	require.Regexp(t, `^bench-noop +`+vNoop+` +acme +3 +0 +0 +\d+\.\d{3}s$`, queues[2])
	require.True(t, strings.HasSuffix(out, `
runs (in flight, and settled in the last 1h0m0s):
WORKFLOW     VERSION       TENANT  STATUS     PHASE      COUNT
bench-chain  `+vChain+`  zed     RUNNING    in-flight  1
bench-chain  -             zed     CANCELLED  settled    1
bench-noop   `+vNoop+`  acme    RUNNING    in-flight  3
`), out)

	code, out, errOut = runCLI(t, p.Flags("stats", "--tenant", "zed", "--window", "10m")...)
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "acme")
	require.Contains(t, out, "runs (in flight, and settled in the last 10m0s):\n")
	require.Regexp(t, `(?m)^bench-chain +- +zed +CANCELLED +settled +1$`, out)

	// Settled runs are counted by the minute: the shortest window still
	// holds the whole minute it ends in. The cancel is in it unless a
	// minute began between the cancel and the stats, and then it is not.
	cancelled, err := client.Get(ctx, uuid.MustParse(chains[0]))
	require.NoError(t, err)
	require.False(t, cancelled.FinishedAt.IsZero())
	code, out, errOut = runCLI(t, p.Flags("stats", "--window", "1us", "--json")...)
	require.Equal(t, 0, code, errOut)
	var short struct {
		At   time.Time `json:"at"`
		Runs []struct {
			Status string `json:"status"`
			Count  int    `json:"count"`
		} `json:"runs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &short), out)
	settled := 0
	for _, r := range short.Runs {
		if r.Status == "CANCELLED" {
			settled += r.Count
		}
	}
	sameMinute := !cancelled.FinishedAt.Truncate(time.Minute).Before(short.At.Add(-time.Microsecond).Truncate(time.Minute))
	if sameMinute {
		require.Equal(t, 1, settled, "cancelled at %s, stats at %s: %s", cancelled.FinishedAt, short.At, out)
	} else {
		require.Zero(t, settled, "cancelled at %s, stats at %s, a minute later: %s", cancelled.FinishedAt, short.At, out)
	}

	// --json.
	before := time.Now()
	code, out, errOut = runCLI(t, p.Flags("stats", "--json")...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 1, strings.Count(out, "\n"))
	var st struct {
		At     time.Time `json:"at"`
		Tenant string    `json:"tenant"`
		Window float64   `json:"window_s"`
		// WindowText is the window as the API spelt it before they
		// shared one document.
		WindowText string `json:"window"`
		Queues     []struct {
			Workflow       string     `json:"workflow"`
			Version        string     `json:"version"`
			Tenant         string     `json:"tenant"`
			Ready          int        `json:"ready"`
			Waiting        int        `json:"waiting"`
			Running        int        `json:"running"`
			OldestReady    *time.Time `json:"oldest_ready"`
			OldestReadyAge *float64   `json:"oldest_ready_age_s"`
		} `json:"queues"`
		Runs []struct {
			Workflow string `json:"workflow"`
			Version  string `json:"version"`
			Tenant   string `json:"tenant"`
			Status   string `json:"status"`
			Settled  bool   `json:"settled"`
			Count    int    `json:"count"`
		} `json:"runs"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&st), out)
	require.WithinDuration(t, before, st.At, time.Minute, "the database's clock")
	require.Empty(t, st.Tenant)
	require.Equal(t, 3600.0, st.Window)
	require.Equal(t, "1h0m0s", st.WindowText)
	require.Len(t, st.Queues, 2)
	q := st.Queues[1]
	require.Equal(t, "bench-noop", q.Workflow)
	require.Equal(t, vNoop, q.Version)
	require.Equal(t, "acme", q.Tenant)
	require.Equal(t, [3]int{3, 0, 0}, [3]int{q.Ready, q.Waiting, q.Running})
	require.NotNil(t, q.OldestReady)
	require.NotNil(t, q.OldestReadyAge)
	require.InDelta(t, st.At.Sub(*q.OldestReady).Seconds(), *q.OldestReadyAge, 0.001)
	require.Greater(t, *q.OldestReadyAge, 0.0)
	require.Len(t, st.Runs, 3)
	require.Equal(t, "CANCELLED", st.Runs[1].Status)
	require.True(t, st.Runs[1].Settled)
	require.Empty(t, st.Runs[1].Version, "settled runs are counted by workflow")
	require.Equal(t, 1, st.Runs[1].Count)
	require.Equal(t, "RUNNING", st.Runs[2].Status)
	require.False(t, st.Runs[2].Settled)
	require.Equal(t, 3, st.Runs[2].Count)
	require.Equal(t, vNoop, st.Runs[2].Version)

	// Waiting and running tasks, and the oldest ready age when none is
	// ready.
	p.StartWorker(t)
	require.Eventually(t, func() bool {
		st, err := client.Stats(ctx, durable.StatsOptions{})
		require.NoError(t, err)
		return len(st.Queues) == 0
	}, 30*time.Second, 20*time.Millisecond)
	sleeping(t, client, "ada")
	code, out, errOut = runCLI(t, p.Flags("stats", "--json", "--tenant", "ada")...)
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, "ada", st.Tenant)
	require.Len(t, st.Queues, 1)
	require.Equal(t, 1, st.Queues[0].Waiting, "the fraud window's sleep")
	require.Nil(t, st.Queues[0].OldestReady)
	require.Nil(t, st.Queues[0].OldestReadyAge)
	code, out, _ = runCLI(t, p.Flags("stats", "--tenant", "ada")...)
	require.Equal(t, 0, code)
	require.Regexp(t, `(?m)^order-processing +[0-9a-f]{12} +ada +0 +1 +0 +-$`, out)
}

func TestStatsUsageErrors(t *testing.T) {
	t.Parallel()
	db := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--window", "0s"}, "durable stats: --window must be positive, got 0s\n"},
		{[]string{"--window", "an hour"}, `invalid value "an hour" for flag -window`},
		{[]string{"--tenant", "a\nb"}, `durable stats: --tenant "a\nb" holds the control character U+000A: use 1-200 bytes`},
		{[]string{"extra"}, `durable stats: unexpected argument "extra"`},
		{[]string{"--database-url="}, "durable stats: --database-url (or $DURABLE_DATABASE_URL) is required\n"},
	} {
		code, out, errOut := runCLI(t, append(append([]string{"stats"}, db...), tc.args...)...)
		require.Equal(t, exitUsage, code, "%v: stderr:\n%s", tc.args, errOut)
		require.Empty(t, out, "%v", tc.args)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}
	code, _, errOut := runCLI(t, "stats", "-h")
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(errOut, "Usage: durable stats --database-url URL [flags]"))

	// A database that cannot be reached is an error, not a usage error.
	code, out, errOut := runCLI(t, "stats", "--database-url", "postgres://nobody@127.0.0.1:1/none?connect_timeout=5")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "durable stats: connecting")
}
