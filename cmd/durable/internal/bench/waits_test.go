package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

func TestParseVmRSS(t *testing.T) {
	t.Parallel()
	status := []byte("Name:\tdurable\nVmPeak:\t  812345 kB\nVmRSS:\t   24576 kB\nRssAnon:\t   10000 kB\n")
	n, err := parseVmRSS(status)
	require.NoError(t, err)
	require.Equal(t, int64(24576*1024), n)
	_, err = parseVmRSS([]byte("Name:\tdurable\n"))
	require.ErrorContains(t, err, "no VmRSS line")
	_, err = parseVmRSS([]byte("VmRSS:\t 12 MB\n"))
	require.ErrorContains(t, err, "unexpected VmRSS line")
	_, err = parseVmRSS([]byte("VmRSS:\t many kB\n"))
	require.ErrorContains(t, err, "unexpected VmRSS line")

	self, err := readRSS("self")
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	require.Greater(t, self, int64(1<<20), "a Go test binary has more than 1 MiB resident")
}

func TestSplitBatches(t *testing.T) {
	t.Parallel()
	require.Equal(t, [][2]int{{0, 1000}, {1000, 2000}, {2000, 2500}}, splitBatches(2500, 1000))
	require.Equal(t, [][2]int{{0, 3}}, splitBatches(3, 1000))
	require.Equal(t, [][2]int{{0, 2}, {2, 4}}, splitBatches(4, 2))
	require.Empty(t, splitBatches(0, 1000))
}

func TestShareTable(t *testing.T) {
	t.Parallel()
	tb, jain := shareTable("CLAIMS", []string{"map", "other0", "other1"}, []int{100, 100, 100})
	require.Equal(t, 1.0, jain)
	require.Equal(t, []string{"tenant", "claims", "share %"}, tb.Columns)
	require.Equal(t, [][]any{{"map", 100, 33.3}, {"other0", 100, 33.3}, {"other1", 100, 33.3}}, tb.Rows)

	tb, jain = shareTable("CLAIMS", []string{"map", "other0"}, []int{300, 0})
	require.InDelta(t, 0.5, jain, 1e-12, "one tenant has every claim: 1/n")
	require.Equal(t, []any{"map", 300, 100.0}, tb.Rows[0])
	require.Equal(t, []any{"other0", 0, 0.0}, tb.Rows[1])

	tb, jain = shareTable("CLAIMS", nil, nil)
	require.Empty(t, tb.Rows)
	require.Equal(t, 1.0, jain)
}

func TestAddSummary(t *testing.T) {
	t.Parallel()
	var rep Report
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	addSummary(&rep, "child_start", "child step claimed → child run created", Summarize(hundred))
	require.Len(t, rep.Metrics, 3)
	for k, want := range map[string]float64{"child_start_p50_ms": 50, "child_start_p99_ms": 99, "child_start_max_ms": 100} {
		m, ok := rep.Metric(k)
		require.True(t, ok, k)
		require.Equal(t, want, m.Value, k)
		require.Equal(t, "ms", m.Unit)
		require.Nil(t, m.Goal, "no goals were set for these")
	}
	m, _ := rep.Metric("child_start_p99_ms")
	require.Equal(t, "child step claimed → child run created p99", m.Label)
}

func TestAddSamples(t *testing.T) {
	t.Parallel()
	in := []memSample{
		{label: "before the runs", rss: 20 << 20, rssAfterGC: 18 << 20, heap: 3 << 20, goroutines: 17},
		{label: "all waiting, quiet period start", waiting: 1000, rss: 30 << 20, rssAfterGC: 25 << 20, heap: 6 << 20, goroutines: 17},
		{label: "quiet period end (+10s)", waiting: 1000, rss: 25 << 20, rssAfterGC: 25<<20 + 100<<10, heap: 6 << 20, goroutines: 18},
	}
	var rep Report
	addSamples(&rep, in)
	require.Len(t, rep.Tables, 1)
	tb := rep.Tables[0]
	require.Equal(t, []string{"when", "runs waiting", "RSS MiB", "RSS after GC MiB", "heap MiB", "goroutines"}, tb.Columns)
	require.Equal(t, []any{"quiet period end (+10s)", 1000, 25.0, 25.1, 6.0, 18}, tb.Rows[2])
	for k, want := range map[string]float64{
		"rss_before_mib": 20, "rss_start_mib": 30, "rss_end_mib": 25, "rss_after_gc_end_mib": 25.1,
		"heap_start_mib": 6, "goroutines_before": 17, "goroutines_end": 18,
	} {
		m, ok := rep.Metric(k)
		require.True(t, ok, k)
		require.Equal(t, want, m.Value, k)
	}

	// Worker processes: their RSS only.
	procs := []memSample{
		{label: "before the runs", rss: 40 << 20, rssAfterGC: -1, heap: -1, goroutines: -1},
		{label: "all waiting, quiet period start", waiting: 5, rss: 41 << 20, rssAfterGC: -1, heap: -1, goroutines: -1},
	}
	rep = Report{}
	addSamples(&rep, procs)
	require.Equal(t, []string{"when", "runs waiting", "RSS MiB"}, rep.Tables[0].Columns)
	require.Equal(t, []any{"all waiting, quiet period start", 5, 41.0}, rep.Tables[0].Rows[1])
	require.Len(t, rep.Metrics, 2)
	_, ok := rep.Metric("goroutines_before")
	require.False(t, ok)
}

func TestMillisBetween(t *testing.T) {
	t.Parallel()
	a := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.Equal(t, 1.5, ms(a, a.Add(1500*time.Microsecond)))
	require.Equal(t, 0.0, ms(time.Time{}, a), "unknown start")
	require.Equal(t, 0.0, ms(a, time.Time{}), "unknown end")
	require.Equal(t, 1.5, mib(3<<19))
}

func TestWaitOptions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		scenario string
		runs     int
	}{{Map, 10_000}, {Events, 100_000}, {Children, 1_000}} {
		o := Options{DatabaseURL: "postgres://x", Scenario: c.scenario}
		require.NoError(t, o.setDefaults(), c.scenario)
		require.Equal(t, c.runs, o.Runs, c.scenario)
		require.Equal(t, ThroughputConcurrency, o.Concurrency, c.scenario)
		require.Equal(t, 1, o.Workers, c.scenario)
		require.Equal(t, 1, o.Tenants, c.scenario)
	}
	o := Options{DatabaseURL: "postgres://x", Scenario: Events}
	require.NoError(t, o.setDefaults())
	require.Equal(t, 10*time.Second, o.Duration, "the quiet period")
	require.Equal(t, DefaultSenders, o.Senders)
	require.Equal(t, 1000, o.SendBatch)
	p := o.params()
	require.Equal(t, Params{Runs: 100_000, Tasks: 100_000, Mode: ModeInProcess, Workers: 1, Concurrency: ThroughputConcurrency,
		Tenants: 1, InsertBatch: 5000, DurationS: 10, Senders: DefaultSenders, SendBatch: 1000}, p)

	o = Options{DatabaseURL: "postgres://x", Scenario: Map, Tenants: 3}
	require.NoError(t, o.setDefaults())
	p = o.params()
	require.Equal(t, 10_000, p.Items)
	require.Equal(t, 1+2*10_000, p.Runs, "the map run and the other tenants' runs")
	require.Equal(t, 10_003+2*10_000, p.Tasks)

	o = Options{DatabaseURL: "postgres://x", Scenario: Children, Runs: 7}
	require.NoError(t, o.setDefaults())
	p = o.params()
	require.Equal(t, 7, p.Runs)
	require.Equal(t, 70, p.Children)
	require.Equal(t, 7*21, p.Tasks, "10 child steps and a join per parent, one step per child")

	for name, mutate := range map[string]func(*Options){
		"too many items":      func(o *Options) { o.Scenario, o.Runs = Map, 100_001 },
		"negative senders":    func(o *Options) { o.Scenario, o.Senders = Events, -1 },
		"negative send batch": func(o *Options) { o.Scenario, o.SendBatch = Events, -1 },
	} {
		o := Options{DatabaseURL: "postgres://x"}
		mutate(&o)
		require.ErrorIs(t, o.setDefaults(), ErrInvalidOptions, name)
	}
}

// runScenario runs a small scenario against PostgreSQL and returns its
// report, with its progress lines in the test's log on failure.
func runScenario(t *testing.T, o Options) *Report {
	t.Helper()
	o.DatabaseURL = pgtest.URL(t)
	var log bytes.Buffer
	o.Log = &log
	rep, err := Run(context.Background(), o)
	require.NoError(t, err, log.String())
	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text))
	t.Logf("%s\n%s", log.String(), text.String())
	return rep
}

func value(t *testing.T, rep *Report, key string) float64 {
	t.Helper()
	m, ok := rep.Metric(key)
	require.True(t, ok, "no metric %q", key)
	return m.Value
}

func TestRunMap(t *testing.T) {
	t.Parallel()
	rep := runScenario(t, Options{Scenario: Map, Runs: 300, Concurrency: 50})
	require.True(t, rep.Verified, rep.Failure)
	require.Equal(t, 300.0, value(t, rep, "items"))
	require.Equal(t, 300.0, value(t, rep, "items_completed"))
	require.Equal(t, 300.0, value(t, rep, "join_output"))
	require.Greater(t, value(t, rep, "items_per_s"), 0.0)
	require.GreaterOrEqual(t, value(t, rep, "fanout_first_claim_ms"), value(t, rep, "fanout_queued_ms"))
	require.GreaterOrEqual(t, value(t, rep, "join_settled_ms"), value(t, rep, "join_start_ms"))
	require.Empty(t, rep.Tables, "no competing tenants by default")

	rep = runScenario(t, Options{Scenario: Map, Runs: 200, Tenants: 3, Concurrency: 20, InsertBatch: 150})
	require.True(t, rep.Verified, rep.Failure)
	require.Equal(t, 400.0, value(t, rep, "other_runs_completed"))
	require.Len(t, rep.Tables, 1)
	rows := rep.Tables[0].Rows
	require.Len(t, rows, 3, "the map's tenant and two others")
	require.Equal(t, "map", rows[0][0])
	jain := value(t, rep, "jain_index")
	require.Greater(t, jain, 1.0/3)
	require.LessOrEqual(t, jain, 1.0)
}

func TestRunEvents(t *testing.T) {
	t.Parallel()
	rep := runScenario(t, Options{Scenario: Events, Runs: 300, Tenants: 2, Duration: 200 * time.Millisecond,
		Senders: 2, SendBatch: 70, InsertBatch: 100})
	require.Equal(t, 300.0, value(t, rep, "runs_completed"))
	require.Equal(t, 300.0, value(t, rep, "waits_completed_own_payload"))
	require.Equal(t, 300.0, value(t, rep, "events_recorded"))
	require.Equal(t, 1.0, value(t, rep, "wait_attempts_max"))
	require.Greater(t, value(t, rep, "events_per_s"), 0.0)
	require.Greater(t, value(t, rep, "send_calls_per_s"), 0.0)
	require.True(t, rep.Verified, rep.Failure)
	require.Greater(t, value(t, rep, "rss_before_mib"), 0.0)
	require.Greater(t, value(t, rep, "goroutines_start"), 0.0)
	require.Len(t, rep.Tables, 1)
	rows := rep.Tables[0].Rows
	require.Len(t, rows, 3)
	require.Equal(t, 0, rows[0][1])
	require.Equal(t, 300, rows[1][1], "every run waits at the quiet period's start")
	require.Equal(t, 300, rows[2][1], "and at its end")
	require.True(t, strings.HasPrefix(rows[2][0].(string), "quiet period end"))
}

func TestRunChildren(t *testing.T) {
	t.Parallel()
	rep := runScenario(t, Options{Scenario: Children, Runs: 20, Tenants: 2, Concurrency: 50})
	require.True(t, rep.Verified, rep.Failure)
	require.Equal(t, 20.0, value(t, rep, "runs_completed"))
	require.Equal(t, 200.0, value(t, rep, "children"))
	require.Equal(t, 200.0, value(t, rep, "children_completed"))
	require.Equal(t, 0.0, value(t, rep, "child_steps_duplicated"))
	require.InDelta(t, 10*value(t, rep, "parents_per_s"), value(t, rep, "children_per_s"), 1e-6)
	for _, k := range []string{"child_start", "child_to_parent", "child_run"} {
		p50, p99, mx := value(t, rep, k+"_p50_ms"), value(t, rep, k+"_p99_ms"), value(t, rep, k+"_max_ms")
		require.GreaterOrEqual(t, p50, 0.0, k)
		require.LessOrEqual(t, p50, p99, k)
		require.LessOrEqual(t, p99, mx, k)
	}
}
