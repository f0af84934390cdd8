package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/tools/clitest"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

func TestBenchUsageErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--database-url", ""}, "--database-url (or $DURABLE_DATABASE_URL) is required"},
		{[]string{"--database-url", "postgres://x"}, "a scenario is required"},
		{[]string{"--database-url", "postgres://x", "--scenario", "fast"}, `unknown scenario "fast"`},
		{[]string{"--database-url", "postgres://x", "--scenario", "single", "--runs", "-5"}, "runs must not be negative"},
		{[]string{"--database-url", "postgres://x", "--scenario", "single", "--processes", "2", "--claim-batch", "10"}, "need in-process workers"},
		{[]string{"--database-url", "postgres://x", "--scenario", "idle", "--schema", "Nope"}, `schema "Nope"`},
		{[]string{"--database-url", "postgres://x", "--scenario", "single", "--runs", "many"}, "invalid value"},
		{[]string{"--database-url", "postgres://x", "--scenario", "single", "extra"}, `unexpected argument "extra"`},
		{[]string{"--database-url", "postgres://x", "--scenario", "list", "--processes", "1"}, "list needs in-process workers"},
		{[]string{"--database-url", "postgres://x", "--scenario", "soak", "--processes", "1"}, "soak needs in-process workers"},
		{[]string{"--database-url", "postgres://x", "--scenario", "soak", "--rate", "-1"}, "rate must not be negative"},
		{[]string{"--database-url", "postgres://x", "--scenario", "soak", "--retention", "5s"}, "retention 5s must be at least the sample interval 10s plus 1s"},
		{[]string{"--database-url", "postgres://x", "--scenario", "soak", "--sample", "1m", "--duration", "30s"}, "sample 1m0s is longer than the duration 30s"},
		{[]string{"--database-url", "postgres://x", "--scenario", "soak", "--autovacuum", "never"}, `autovacuum "never"`},
		{[]string{"--database-url", "postgres://x", "--scenario", "latency", "--wal"}, "wal: single, dag and func only, not latency"},
		{[]string{"--no-such-flag"}, "Usage: durable bench"},
	} {
		code, out, errOut := runCLI(t, append([]string{"bench"}, c.args...)...)
		require.Equal(t, 2, code, "%v\nstderr:\n%s", c.args, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, c.want, "%v", c.args)
	}
	code, _, errOut := runCLI(t, "bench", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "Usage: durable bench")
	require.Contains(t, errOut, "-scenario")
	for _, want := range []string{"  func ", "  list ", "  soak ", "-rate", "-retention", "-sample", "-repeat", "-autovacuum", "-wal", "pg_walinspect"} {
		require.Contains(t, errOut, want)
	}
}

// benchJSON runs durable bench with --json and returns the parsed report,
// requiring exit status 0 and exactly one JSON object on stdout.
func benchJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	url := pgtest.URL(t)
	args = append([]string{"bench", "--database-url", url, "--json"}, args...)
	start := time.Now()
	code, out, errOut := runCLI(t, args...)
	t.Logf("%v took %s", args[3:], time.Since(start).Round(time.Millisecond))
	// The bench's log (stderr) is what explains a figure a later check
	// finds wrong.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stderr of %v:\n%s", args[3:], errOut)
		}
	})
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Equal(t, 1, strings.Count(out, "\n"), "one line of JSON on stdout:\n%s", out)
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Equal(t, true, rep["verified"], "stderr:\n%s", errOut)
	require.Contains(t, errOut, "FIGURE", "the table goes to stderr with --json")
	require.Contains(t, errOut, "verified: yes")
	require.Equal(t, false, rep["schema_kept"])
	require.True(t, strings.HasPrefix(rep["schema"].(string), "durable_bench_"))
	return rep
}

// metric returns a report's metric by key, failing if it is missing.
func metric(t *testing.T, rep map[string]any, key string) map[string]any {
	t.Helper()
	for _, m := range rep["metrics"].([]any) {
		if mm := m.(map[string]any); mm["key"] == key {
			return mm
		}
	}
	t.Fatalf("no metric %q in %v", key, rep["metrics"])
	return nil
}

func value(t *testing.T, rep map[string]any, key string) float64 {
	t.Helper()
	return metric(t, rep, key)["value"].(float64)
}

func TestBenchSingle(t *testing.T) {
	t.Parallel()
	rep := benchJSON(t, "--scenario", "single", "--runs", "200", "--insert-batch", "64", "--tenants", "3")
	require.Equal(t, "single", rep["scenario"])
	require.Equal(t, 200.0, value(t, rep, "runs_completed"))
	require.Equal(t, 200.0, value(t, rep, "tasks_completed"))
	require.Greater(t, value(t, rep, "runs_per_s"), 0.0)
	require.Greater(t, value(t, rep, "window_s"), 0.0)
	require.Greater(t, value(t, rep, "insert_runs_per_s"), 0.0)
	goal := metric(t, rep, "runs_per_s")["goal"].(map[string]any)
	require.Equal(t, map[string]any{"op": ">=", "value": 20000.0}, goal)
	require.Contains(t, metric(t, rep, "runs_per_s"), "met")
	params := rep["params"].(map[string]any)
	require.Equal(t, "in-process", params["mode"])
	require.Equal(t, 200.0, params["runs"])
	require.Len(t, rep["references"], 3)
}

// TestBenchWAL: --wal adds the WAL per run of each phase and, where
// pg_walinspect can be used (the tests' role is a superuser, who may create
// it), its attribution.
func TestBenchWAL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		scenario string
		runs     int
		per      string
	}{{"single", 300, "run"}, {"dag", 30, "task"}, {"func", 30, "step"}} {
		rep := benchJSON(t, "--scenario", c.scenario, "--runs", fmt.Sprint(c.runs), "--wal")
		require.Greater(t, value(t, rep, "wal_insert_b_per_run"), 100.0)
		require.Greater(t, value(t, rep, "wal_work_b_per_run"), 100.0)
		if c.per == "step" {
			require.Greater(t, value(t, rep, "wal_work_b_per_step"), 100.0)
			require.NotContains(t, metric(t, rep, "wal_total_b_per_step"), "goal", "func has no WAL goal")
		} else {
			goal := metric(t, rep, "wal_total_b_per_"+c.per)["goal"].(map[string]any)
			require.Equal(t, "<=", goal["op"])
		}
		notes := fmt.Sprint(rep["notes"])
		require.Contains(t, notes, "WAL positions:")
		// Another bench's schema may hold pg_walinspect, and drop it while
		// this one reads: the figures stand, the attribution is missing.
		if strings.Contains(notes, "pg_walinspect is not") || strings.Contains(notes, "reading the WAL back") {
			t.Logf("%s: no attribution: %s", c.scenario, notes)
			continue
		}
		require.Greater(t, value(t, rep, "wal_work_fpi_b_per_"+c.per), 0.0)
		titles := map[string]map[string]any{}
		for _, tb := range rep["tables"].([]any) {
			tb := tb.(map[string]any)
			titles[strings.SplitN(tb["title"].(string), " (", 2)[0]] = tb
		}
		for _, want := range []string{"WAL BY OPERATION, work phase", "WAL BY RELATION, work phase", "WAL BY RECORD TYPE, work phase",
			"WAL BY OPERATION, RELATION AND RECORD TYPE, work phase", "WAL BY RELATION, insert phase", "WAL BY RECORD TYPE, insert phase"} {
			require.Contains(t, titles, want, c.scenario)
		}
		// The claim and the finish are there, and the tasks table is
		// written in both phases.
		ops := map[string]bool{}
		for _, row := range titles["WAL BY OPERATION, work phase"]["rows"].([]any) {
			ops[row.([]any)[0].(string)] = true
		}
		require.True(t, ops["claim"] && ops["finish"] && ops["settle"], "%v", ops)
		if c.scenario == "func" {
			// A checkpoint inserts its records and updates no task: it is
			// a finish all the same, not "other" (which would then hold
			// most of the work's WAL; the workers' and the leader's own
			// records, "other" too, are a few percent of a short run's).
			for _, row := range titles["WAL BY OPERATION, work phase"]["rows"].([]any) {
				if r := row.([]any); r[0] == "other" {
					require.Less(t, r[5].(float64), 10.0, "share of other: %v", r)
				}
			}
		}
		for _, phase := range []string{"work", "insert"} {
			rels := map[string]bool{}
			for _, row := range titles["WAL BY RELATION, "+phase+" phase"]["rows"].([]any) {
				rels[row.([]any)[0].(string)] = true
			}
			require.True(t, rels["tasks"] && rels["tasks_pkey"] && rels["total"], "%s phase: %v", phase, rels)
		}
	}
}

// TestBenchUnverified: work that does not complete in time fails the
// command (exit 1) but still reports what was measured.
func TestBenchUnverified(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	code, out, errOut := runCLI(t, "bench", "--database-url", url, "--json", "--scenario", "single", "--runs", "3000", "--timeout", "1ms")
	require.Equal(t, 1, code, "stderr:\n%s", errOut)
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Equal(t, false, rep["verified"])
	require.Contains(t, rep["failure"], "timed out after 1ms")
	require.Contains(t, errOut, "verified: NO: timed out")
}

func TestBenchDAG(t *testing.T) {
	t.Parallel()
	rep := benchJSON(t, "--scenario", "dag", "--runs", "20", "--claim-batch", "7", "--finish-batch", "5", "--workers", "2")
	require.Equal(t, 20.0, value(t, rep, "runs_completed"))
	require.Equal(t, 200.0, value(t, rep, "tasks_completed"))
	require.Greater(t, value(t, rep, "tasks_per_s"), 0.0)
	require.InDelta(t, value(t, rep, "tasks_per_s")/10, value(t, rep, "runs_per_s"), 1e-6)
	params := rep["params"].(map[string]any)
	require.Equal(t, 7.0, params["claim_batch"])
	require.Equal(t, 5.0, params["finish_batch"])
	require.Equal(t, 2.0, params["workers"])
}

// TestBenchFunc: the func scenario's runs each record FuncSteps steps, and
// its rate is in steps/s.
func TestBenchFunc(t *testing.T) {
	t.Parallel()
	rep := benchJSON(t, "--scenario", "func", "--runs", "20", "--tenants", "2", "--workers", "2")
	require.Equal(t, "func", rep["scenario"])
	require.Equal(t, 20.0, value(t, rep, "runs_completed"))
	require.Equal(t, 200.0, value(t, rep, "steps_completed"))
	require.Equal(t, 220.0, value(t, rep, "tasks_completed"), "a body and ten records per run")
	require.Greater(t, value(t, rep, "steps_per_s"), 0.0)
	require.InDelta(t, value(t, rep, "steps_per_s")/10, value(t, rep, "runs_per_s"), 1e-6)
	goal := metric(t, rep, "steps_per_s")["goal"].(map[string]any)
	require.Equal(t, map[string]any{"op": ">=", "value": 15000.0}, goal)
	params := rep["params"].(map[string]any)
	require.Equal(t, 20.0, params["runs"])
	require.Equal(t, 200.0, params["steps"])
	require.Equal(t, 220.0, params["tasks"])
	require.Equal(t, 1000.0, params["concurrency"])
	// What the workers sent: each checkpoint is not a transaction of its
	// own, but at most one.
	require.Greater(t, value(t, rep, "worker_statements_per_step"), 0.0)
	require.Greater(t, value(t, rep, "worker_round_trips_per_step"), 0.0)
	tx := value(t, rep, "worker_transactions_per_step")
	require.Greater(t, tx, 0.0)
	require.LessOrEqual(t, tx, 1.5)
	var stmts map[string]any
	for _, tb := range rep["tables"].([]any) {
		if tb := tb.(map[string]any); strings.HasPrefix(tb["title"].(string), "WORKERS' STATEMENTS") {
			stmts = tb
		}
	}
	require.NotNil(t, stmts, "the table of the workers' statements")
	require.NotEmpty(t, stmts["rows"])
}

func TestBenchLatency(t *testing.T) {
	t.Parallel()
	rep := benchJSON(t, "--scenario", "latency", "--runs", "20", "--interval", "1ms")
	require.Equal(t, 20.0, value(t, rep, "runs_completed"))
	for _, k := range []string{"trigger_to_start", "parent_to_child", "trigger_to_settled", "client_trigger_to_result"} {
		p50, p95, p99, mx := value(t, rep, k+"_p50_ms"), value(t, rep, k+"_p95_ms"), value(t, rep, k+"_p99_ms"), value(t, rep, k+"_max_ms")
		require.Greater(t, p50, 0.0, k)
		require.LessOrEqual(t, p50, p95, k)
		require.LessOrEqual(t, p95, p99, k)
		require.LessOrEqual(t, p99, mx, k)
		require.Less(t, mx, 10_000.0, k)
	}
	// A run settles after its first step started and its hand-off.
	require.Greater(t, value(t, rep, "trigger_to_settled_max_ms"), value(t, rep, "trigger_to_start_p50_ms"))
	require.Equal(t, map[string]any{"op": "<=", "value": 2.0}, metric(t, rep, "trigger_to_start_p50_ms")["goal"])
	require.Equal(t, map[string]any{"op": "<=", "value": 10.0}, metric(t, rep, "parent_to_child_p99_ms")["goal"])
}

func TestBenchFairness(t *testing.T) {
	t.Parallel()
	rep := benchJSON(t, "--scenario", "fairness", "--runs", "300", "--tenants", "4", "--tenant-step", "20", "--concurrency", "8")
	require.Equal(t, 200.0, value(t, rep, "runs_completed"), "20+40+60+80 backlog runs")
	pos := value(t, rep, "newcomer_claim_position")
	require.GreaterOrEqual(t, pos, 1.0)
	require.LessOrEqual(t, pos, 2.0, "block-based fair queuing serves the newcomer within 2 claims")
	require.GreaterOrEqual(t, value(t, rep, "newcomer_wait_ms"), 0.0)
	jain := value(t, rep, "jain_index")
	require.Greater(t, jain, 0.25)
	require.LessOrEqual(t, jain, 1.0)
	require.GreaterOrEqual(t, value(t, rep, "window_completions"), 60.0, "4 tenants, about the smallest's 20 each")

	tables := rep["tables"].([]any)
	require.Len(t, tables, 1)
	rows := tables[0].(map[string]any)["rows"].([]any)
	require.Len(t, rows, 4)
	first := rows[0].([]any)
	require.Equal(t, "f001", first[0])
	require.Equal(t, 20.0, first[1])
	require.Equal(t, 20.0, first[2], "the smallest backlog completes within its own window")
}

func TestBenchIdle(t *testing.T) {
	t.Parallel()
	rep := benchJSON(t, "--scenario", "idle", "--duration", "2s", "--settle", "1s", "--workers", "2")
	require.GreaterOrEqual(t, value(t, rep, "measured_s"), 2.0)
	require.GreaterOrEqual(t, value(t, rep, "traced_statements_per_s_per_worker"), 0.0)
	require.GreaterOrEqual(t, value(t, rep, "round_trips_per_s_per_worker"), 0.0)
	require.Equal(t, map[string]any{"op": "<=", "value": 1.0}, metric(t, rep, "statements_per_s_per_worker")["goal"])
	metric(t, rep, "statements_per_s")
	tables := map[string][]any{}
	for _, tb := range rep["tables"].([]any) {
		tb := tb.(map[string]any)
		tables[tb["title"].(string)] = tb["rows"].([]any)
	}
	oneLeader := func(rows []any) {
		t.Helper()
		require.Len(t, rows, 2)
		leaders := 0
		for _, r := range rows {
			if r.([]any)[1] == "yes" {
				leaders++
			}
		}
		require.Equal(t, 1, leaders, "one worker leads")
	}
	oneLeader(tables["PER WORKER (in-process, counted on its connections)"])

	notes := strings.Join(toStrings(rep["notes"].([]any)), "\n")
	method := rep["method"].(string)
	switch method {
	case "server log":
		// The scratch database logs every statement, and this server's log
		// is readable (a superuser, on the machine running PostgreSQL).
		oneLeader(tables["PER WORKER (server log: statements of its backends)"])
		for _, k := range []string{"leader_statements_per_s", "non_leader_statements_per_s"} {
			require.Equal(t, map[string]any{"op": "<=", "value": 1.0}, metric(t, rep, k)["goal"], k)
			require.GreaterOrEqual(t, value(t, rep, k), 0.0, k)
		}
		require.Contains(t, notes, `lines "LOG:  statement:" and "LOG:  execute" in the server log`)
		var n float64
		for _, r := range tables["PER WORKER (server log: statements of its backends)"] {
			n += r.([]any)[2].(float64)
		}
		require.InDelta(t, value(t, rep, "statements_per_s"), n/value(t, rep, "measured_s"), 0.6,
			"the workers' statements, listeners aside, make the total")
	case "pg_stat_statements", "pg_stat_database":
		require.Contains(t, notes, "server count: "+method+", because the server log could not be used")
	default:
		t.Fatalf("unknown method %q", method)
	}
	if db, ok := rep["database"].(string); ok {
		require.True(t, strings.HasPrefix(db, "durable_bench_"))
		require.Equal(t, 0.0, value(t, rep, "other_sessions"), "nobody else uses the scratch database")
	}
}

func toStrings(xs []any) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.(string)
	}
	return out
}

func TestBenchList(t *testing.T) {
	t.Parallel()
	rep := benchJSON(t, "--scenario", "list", "--runs", "2000", "--repeat", "5", "--insert-batch", "250", "--tenants", "10")
	require.Equal(t, "list", rep["scenario"])
	require.Equal(t, 1960.0, value(t, rep, "runs_completed"))
	require.Equal(t, 20.0, value(t, rep, "runs_failed"))
	require.Equal(t, 20.0, value(t, rep, "runs_in_flight"))
	require.Greater(t, value(t, rep, "setup_s"), 0.0)
	for _, k := range []string{"first", "deep", "tenant", "tenant_deep", "failed", "running", "created_range", "tenant_failed", "tenant_running", "workflow", "stats"} {
		if k == "stats" {
			require.Greater(t, value(t, rep, "stats_p50_ms"), 0.0)
			require.LessOrEqual(t, value(t, rep, "stats_p50_ms"), value(t, rep, "stats_p99_ms"))
			continue
		}
		p50, p95, p99 := value(t, rep, "list_"+k+"_p50_ms"), value(t, rep, "list_"+k+"_p95_ms"), value(t, rep, "list_"+k+"_p99_ms")
		require.Greater(t, p50, 0.0, k)
		require.LessOrEqual(t, p50, p95, k)
		require.LessOrEqual(t, p95, p99, k)
	}
	require.Equal(t, map[string]any{"op": "<=", "value": 5.0}, metric(t, rep, "list_deep_p50_ms")["goal"])
	params := rep["params"].(map[string]any)
	require.Equal(t, 2000.0, params["runs"])
	require.Equal(t, 5.0, params["repeat"])

	pages := rep["tables"].([]any)[0].(map[string]any)
	rows := pages["rows"].([]any)
	require.Len(t, rows, 10)
	returned := map[string]float64{}
	for _, r := range rows {
		r := r.([]any)
		returned[r[0].(string)] = r[2].(float64)
	}
	require.Equal(t, 50.0, returned["first page"])
	require.Equal(t, 20.0, returned["status FAILED, first page"])
	require.Equal(t, 20.0, returned["status RUNNING, first page"])
	require.Equal(t, 2.0, returned["tenant and status RUNNING, first page"])
	require.Equal(t, 50.0, returned["created in a range (¼ to ½ down), first page"])
}

func TestBenchSoak(t *testing.T) {
	t.Parallel()
	rep := benchJSON(t, "--scenario", "soak", "--duration", "10s", "--rate", "100", "--sample", "1s", "--retention", "3s")
	require.Equal(t, "soak", rep["scenario"])
	series := rep["series"].([]any)
	require.Len(t, series, 10)
	var triggered, completed float64
	for i, s := range series {
		s := s.(map[string]any)
		require.InDelta(t, float64(i+1), s["t_s"].(float64), 1e-9)
		triggered += s["triggered"].(float64)
		completed += s["completed"].(float64)
		require.NotEmpty(t, s["tables"])
		require.Greater(t, s["stats_ms"].(float64), 0.0, "Stats timed at each sample")
		require.Greater(t, s["list_ms"].(float64), 0.0, "the runs list timed at each sample")
	}
	require.Equal(t, 1000.0, triggered)
	// Every run is accounted for at the final sample: completed by the
	// end (counted by an interval, or not: the sampler fell behind, which
	// the report says), completed after it, or in flight. How many settle
	// by the end, and how evenly, is the machine's speed, which the bench
	// reports: CI's loaded machine has had the intervals count 95 of the
	// 1,000, and 241 in the last window (2 s, 200 due).
	settled, uncounted := value(t, rep, "runs_completed"), value(t, rep, "runs_uncounted")
	require.GreaterOrEqual(t, uncounted, 0.0, "no run is counted twice")
	require.Equal(t, completed+uncounted, settled)
	require.Equal(t, 1000.0, settled+value(t, rep, "runs_completed_after")+value(t, rep, "in_flight_end"))
	require.Greater(t, value(t, rep, "pruned"), 0.0, "a 3s retention prunes during 10s")
	require.Greater(t, completed, 0.0)
	if value(t, rep, "last_runs_per_s") > 0 {
		require.Greater(t, value(t, rep, "last_p99_ms"), 0.0)
	}
	metric(t, rep, "size_growth_pct")
	metric(t, rep, "throughput_change_pct")
	metric(t, rep, "p99_change_pct")
	// The early window opens the run's second half: 5-7s of 10s.
	require.Greater(t, value(t, rep, "early_stats_ms"), 0.0)
	require.Greater(t, value(t, rep, "last_list_ms"), 0.0)
	metric(t, rep, "stats_change_pct")
	metric(t, rep, "list_change_pct")
	params := rep["params"].(map[string]any)
	require.Contains(t, []any{"server", "bench"}, params["autovacuum"])
	require.Equal(t, 100.0, params["rate"])
	require.Equal(t, 3.0, params["retention_s"])
}

// TestBenchProcesses runs workers as `durable worker` processes of a
// freshly built binary.
func TestBenchProcesses(t *testing.T) {
	t.Parallel()
	pgtest.URL(t)
	exe := clitest.Build(t, ".", ".", "durable")

	rep := benchJSON(t, "--scenario", "single", "--runs", "300", "--processes", "2", "--concurrency", "20", "--worker-exe", exe)
	require.Equal(t, 300.0, value(t, rep, "runs_completed"))
	params := rep["params"].(map[string]any)
	require.Equal(t, "processes", params["mode"])
	require.Equal(t, 2.0, params["workers"])

	rep = benchJSON(t, "--scenario", "latency", "--runs", "5", "--processes", "1", "--worker-exe", exe)
	require.Equal(t, 5.0, value(t, rep, "runs_completed"))
}
