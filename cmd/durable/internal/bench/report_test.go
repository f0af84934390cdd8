package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func sampleReport() *Report {
	r := &Report{
		Scenario: Single, Description: "1,000 one-step bench-noop runs inserted first, then worked",
		Schema: "durable_bench_0011aabb", Verified: true, ElapsedSeconds: 3.21,
		Params: Params{Runs: 1000, Tasks: 1000, Mode: ModeInProcess, Workers: 1, Concurrency: 100, Tenants: 1, InsertBatch: 5000},
	}
	r.AddGoal("runs_per_s", "throughput", 23456.7, "runs/s", 0, AtLeast(20_000))
	r.AddGoal("p99_ms", "p99", 12.345, "ms", 2, AtMost(10))
	r.Add("window_s", "window", 0.0426, "s", 3)
	r.Tables = []Table{{Title: "PER TENANT", Columns: []string{"tenant", "completed", "share %"},
		Rows: [][]any{{"f001", 100, 9.1}, {"f002", 1234, 10.1}}}}
	r.References = []Reference{riverInsertedFirst}
	r.Note("a note with %d", 42)
	return r
}

func TestReportText(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	require.NoError(t, sampleReport().WriteText(&buf))
	out := buf.String()
	for _, want := range []string{
		"durable bench single: 1,000 one-step bench-noop runs inserted first, then worked\n",
		"workers: 1 in-process engine, concurrency 100 each, claim batch default, finish batch default\n",
		"schema: durable_bench_0011aabb (dropped)\n",
		"FIGURE", "GOAL",
		"23,457", "≥ 20,000", "met",
		"12.35", "≤ 10.00", "MISSED",
		"0.043",
		"PER TENANT", "TENANT", "1,234", "9.1",
		"River 0.43", "24,590 jobs/s",
		"note: a note with 42\n",
		"verified: yes\n",
		"took 3.2s\n",
	} {
		require.Contains(t, out, want)
	}
	// Columns are aligned: the values start at the same offset.
	var cols []int
	for _, line := range strings.Split(out, "\n") {
		for _, v := range []string{"23,457", "12.35", "0.043"} {
			if i := strings.Index(line, v); i > 0 && !strings.Contains(line, "took") {
				cols = append(cols, i)
			}
		}
	}
	require.Len(t, cols, 3)
	require.Equal(t, cols[0], cols[1])
	require.Equal(t, cols[0], cols[2])

	failed := sampleReport()
	failed.Verified, failed.Failure = false, "12 of 1,000 runs completed"
	failed.Params.Mode, failed.Params.Workers, failed.Params.ClaimBatch = ModeProcesses, 2, 50
	failed.SchemaKept = true
	buf.Reset()
	require.NoError(t, failed.WriteText(&buf))
	require.Contains(t, buf.String(), "verified: NO: 12 of 1,000 runs completed\n")
	require.Contains(t, buf.String(), "workers: 2 `durable worker` processes, concurrency 100 each, claim batch 50, finish batch default\n")
	require.Contains(t, buf.String(), "schema: durable_bench_0011aabb (kept)\n")
}

func TestReportJSON(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	require.NoError(t, sampleReport().WriteJSON(&buf))
	require.Equal(t, 1, strings.Count(buf.String(), "\n"), "one line")
	var got map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	require.Equal(t, "single", got["scenario"])
	require.Equal(t, true, got["verified"])
	require.NotContains(t, got, "failure")
	require.Equal(t, 3.21, got["elapsed_s"])
	params := got["params"].(map[string]any)
	require.Equal(t, 1000.0, params["runs"])
	require.Equal(t, "in-process", params["mode"])
	require.Equal(t, 0.0, params["claim_batch"])

	metrics := got["metrics"].([]any)
	require.Len(t, metrics, 3)
	m0 := metrics[0].(map[string]any)
	require.Equal(t, "runs_per_s", m0["key"])
	require.Equal(t, 23456.7, m0["value"])
	require.Equal(t, "runs/s", m0["unit"])
	require.Equal(t, map[string]any{"op": ">=", "value": 20000.0}, m0["goal"])
	require.Equal(t, true, m0["met"])
	require.Equal(t, false, metrics[1].(map[string]any)["met"])
	m2 := metrics[2].(map[string]any)
	require.NotContains(t, m2, "goal")
	require.NotContains(t, m2, "met")

	table := got["tables"].([]any)[0].(map[string]any)
	require.Equal(t, []any{"tenant", "completed", "share %"}, table["columns"])
	require.Equal(t, []any{"f001", 100.0, 9.1}, table["rows"].([]any)[0])
	require.Len(t, got["references"], 1)
	require.Equal(t, []any{"a note with 42"}, got["notes"])
}

func TestFormatNumber(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v    float64
		d    int
		want string
	}{
		{0, 0, "0"}, {999, 0, "999"}, {1000, 0, "1,000"}, {23456.7, 0, "23,457"},
		{1234567.891, 2, "1,234,567.89"}, {-1234.5, 1, "-1,234.5"}, {-0.0001, 2, "0.00"}, {0.04263, 3, "0.043"},
	} {
		require.Equal(t, c.want, FormatNumber(c.v, c.d), "%v with %d decimals", c.v, c.d)
	}
}

func TestGoal(t *testing.T) {
	t.Parallel()
	require.True(t, AtLeast(0.99).Met(0.99))
	require.False(t, AtLeast(0.99).Met(0.989))
	require.True(t, AtMost(2).Met(2))
	require.False(t, AtMost(2).Met(2.01))
	require.Equal(t, "≤ 2.00", AtMost(2).String(2))
}

func TestOptions(t *testing.T) {
	t.Parallel()
	valid := func() Options { return Options{DatabaseURL: "postgres://x", Scenario: Single} }
	o := valid()
	require.NoError(t, o.setDefaults())
	require.Equal(t, 100_000, o.Runs)
	require.Equal(t, 1, o.Workers)
	require.Equal(t, ThroughputConcurrency, o.Concurrency)
	require.Equal(t, 5000, o.InsertBatch)

	o = Options{DatabaseURL: "postgres://x", Scenario: Idle}
	require.NoError(t, o.setDefaults())
	require.Equal(t, 3, o.Workers)

	o = Options{DatabaseURL: "postgres://x", Scenario: Fairness, Processes: 2, WorkerExe: "/bin/durable"}
	require.NoError(t, o.setDefaults())
	require.Equal(t, 2, o.Workers)
	require.Equal(t, 10, o.Tenants)
	require.Equal(t, 10_000, o.Runs)
	require.Equal(t, 100, o.Concurrency)

	for name, mutate := range map[string]func(*Options){
		"no scenario":       func(o *Options) { o.Scenario = "" },
		"unknown scenario":  func(o *Options) { o.Scenario = "fast" },
		"no database":       func(o *Options) { o.DatabaseURL = "" },
		"negative runs":     func(o *Options) { o.Runs = -1 },
		"negative duration": func(o *Options) { o.Duration = -1 },
		"bad schema":        func(o *Options) { o.Schema = "Bad-Name" },
		"claim batch with processes": func(o *Options) {
			o.Processes, o.WorkerExe, o.ClaimBatch = 2, "/bin/durable", 10
		},
		"workers and processes disagree": func(o *Options) {
			o.Processes, o.WorkerExe, o.Workers = 2, "/bin/durable", 3
		},
	} {
		o := valid()
		mutate(&o)
		require.ErrorIs(t, o.setDefaults(), ErrInvalidOptions, name)
	}
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	u, err := withDatabase("postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "scratch")
	require.NoError(t, err)
	require.Equal(t, "postgres://postgres@127.0.0.1:5432/scratch?sslmode=disable", u)
	u, err = withDatabase("host=localhost dbname=test", "scratch")
	require.NoError(t, err)
	require.Equal(t, "host=localhost dbname=test dbname=scratch", u)
}
