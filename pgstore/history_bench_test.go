package pgstore_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// BenchmarkRetention: the retention of a day of settled one-step runs
// (DURABLE_BENCH_RUNS of them, 1,000,000 by default), on a fresh schema
// each time, with the seconds and the bytes of WAL it takes:
//
//   - period: the runs are in their day's partitions (time-ordered ids,
//     as the engine makes them), which the leader's retention drops whole
//     (store.PruneRunsParams.Lazy);
//   - rows: the runs are in the default partition (ids that are not
//     time-ordered; before migration 017, every run), deleted in batches
//     of 500 as Engine.Prune does. It costs about the same per run
//     whatever their number: it works on a tenth of them (at least 1,000),
//     and its per-run figures are the ones to compare.
//
// The runs are written with SQL (the rows the engine writes for a
// completed no-op run: the run, its task holding its happy-path events),
// then a CHECKPOINT, so that the WAL measured is the deletion's own.
//
//	go test -run '^$' -bench Retention -benchtime 1x ./pgstore/
func BenchmarkRetention(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("DURABLE_BENCH_RUNS")); err == nil && v > 0 {
		n = v
	}
	const retention = 7 * 24 * time.Hour // periods of a day
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	later := day.Add(24*time.Hour + retention + time.Second)
	for _, mode := range []string{"period", "rows"} {
		b.Run(mode, func(b *testing.B) {
			runs := n
			if mode == "rows" {
				runs = max(n/10, 1000)
			}
			var secs, wal float64
			for range b.N {
				pool, schema, s := benchSchema(b)
				if mode == "period" { // the day's partitions, as the leader makes them
					if _, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: day.Add(-time.Hour), OlderThan: retention, Limit: 500, Lazy: true}); err != nil {
						b.Fatal(err)
					}
				}
				fillSettledRuns(b, pool, schema, day, runs, mode == "period")
				lsn0 := walLSN(b, pool)
				start := time.Now()
				deleted := 0
				for {
					res, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: later, OlderThan: retention, Limit: 500, Lazy: mode == "period"})
					if err != nil {
						b.Fatal(err)
					}
					deleted += res.Deleted
					if res.Deleted < 500 {
						break
					}
				}
				secs += time.Since(start).Seconds()
				wal += float64(walLSN(b, pool) - lsn0)
				if deleted != runs {
					b.Fatalf("deleted %d runs of %d", deleted, runs)
				}
			}
			b.ReportMetric(float64(runs), "runs")
			b.ReportMetric(secs/float64(b.N), "s/prune")
			b.ReportMetric(secs/float64(b.N)/float64(runs)*1e6, "µs/run")
			b.ReportMetric(wal/float64(b.N), "WAL-B/prune")
			b.ReportMetric(wal/float64(b.N)/float64(runs), "WAL-B/run")
		})
	}
}

// fillSettledRuns writes n completed one-step runs created during day,
// with time-ordered ids (in the day's period) or not (in the default
// partition), and checkpoints.
func fillSettledRuns(b *testing.B, pool *pgxpool.Pool, schema string, day time.Time, n int, timeOrdered bool) {
	b.Helper()
	q := func(sql string, args ...any) {
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			b.Fatal(err)
		}
	}
	id := pgx.Identifier{schema}.Sanitize()
	q(`INSERT INTO ` + id + `.shapes (id, workflow, shape) VALUES ('00000000-0000-0000-0000-00000000b001', 'bench-noop', '{}')`)
	// Time-ordered: the day's milliseconds in the first 48 bits, then
	// version 7; otherwise random (version 4).
	ids := `(lpad(to_hex($2::bigint + (g * 86399999::bigint / $1)), 12, '0') || '7' || substr(md5(g::text), 1, 19))::uuid`
	if !timeOrdered {
		ids = `(substr(md5((g + $2::bigint)::text), 1, 12) || '4' || substr(md5((g + 1)::text), 1, 19))::uuid`
	}
	q(`INSERT INTO `+id+`.runs (id, workflow, tenant, shape_id, status, input, created_at, finished_at, unsuccessful)
SELECT `+ids+`, 'bench-noop', 't', '00000000-0000-0000-0000-00000000b001', 'COMPLETED', '{}',
       $3::timestamptz + g * interval '86 ms', $3::timestamptz + g * interval '86 ms' + interval '5 ms', false
FROM generate_series(0, $1 - 1) g`, n, day.UnixMilli(), day)
	q(`INSERT INTO ` + id + `.tasks (run_id, name, tenant, idx, kind, state, attempt, token, output, started_at, finished_at,
                              q_id, q_at, q_attempt, s_id, c_id)
SELECT id, 'a', 't', 0, 'step', 'COMPLETED', 1, 1, '1', created_at, finished_at, 1, created_at, 0, 2, 3 FROM ` + id + `.runs`)
	q(`CHECKPOINT`)
}

// BenchmarkHistoryAttach: the leader's first pass on a database whose
// default partitions hold DURABLE_BENCH_RUNS settled runs (1,000,000 by
// default; after an upgrade, every run from before), which makes the
// next two periods: how long it takes, and so how long the partitioned
// tables are locked (the default partitions must be read to prove them
// free of the periods' rows).
//
//	go test -run '^$' -bench HistoryAttach -benchtime 1x ./pgstore/
func BenchmarkHistoryAttach(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("DURABLE_BENCH_RUNS")); err == nil && v > 0 {
		n = v
	}
	const retention = 7 * 24 * time.Hour
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var secs float64
	for range b.N {
		pool, schema, s := benchSchema(b)
		fillSettledRuns(b, pool, schema, day, n, false)
		start := time.Now()
		if _, err := s.PruneRuns(ctx, &store.PruneRunsParams{Now: day.Add(time.Hour), OlderThan: retention, Limit: 500, Lazy: true}); err != nil {
			b.Fatal(err)
		}
		secs += time.Since(start).Seconds()
		var periods int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema}.Sanitize()+`.history_partitions`).Scan(&periods); err != nil {
			b.Fatal(err)
		}
		if periods != 2 {
			b.Fatalf("%d periods made, want 2", periods)
		}
	}
	b.ReportMetric(float64(n), "runs")
	b.ReportMetric(secs/float64(b.N), "s/pass")
}

// benchSchema is a store on a fresh schema of its own, with its pool and
// schema.
func benchSchema(b *testing.B) (*pgxpool.Pool, string, *pgstore.Store) {
	b.Helper()
	pool := pgtest.Pool(b)
	schema := pgtest.Schema(b, pool)
	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	return pool, schema, s
}

func walLSN(b *testing.B, pool *pgxpool.Pool) int64 {
	b.Helper()
	var lsn int64
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'`).Scan(&lsn); err != nil {
		b.Fatal(err)
	}
	return lsn
}
