package pgtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// DeadTasks leaves at least n dead rows in the tasks table of schema (a
// migrated one), as a retention that vacuum never follows would: it turns
// autovacuum off for that table, creates runs of 100 steps each through
// the store until they have n tasks, deletes the runs (their tasks go
// with them), makes the deleting session report its statistics at once,
// and waits until the statistics count every row it made as dead.
func DeadTasks(t testing.TB, pool *pgxpool.Pool, schema string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runs := pgx.Identifier{schema, "runs"}.Sanitize()
	// The runs made here (UUIDv4 ids) are in the history's default
	// partition (migration 017); before it, in the table.
	tasks := pgx.Identifier{schema, "tasks"}.Sanitize()
	var partitioned bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", pgx.Identifier{schema, "tasks_default"}.Sanitize()).Scan(&partitioned); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if partitioned {
		tasks = pgx.Identifier{schema, "tasks_default"}.Sanitize()
	}
	if _, err := pool.Exec(ctx, "ALTER TABLE "+tasks+" SET (autovacuum_enabled = false)"); err != nil {
		t.Fatalf("pgtest: turn autovacuum off for %s: %v", tasks, err)
	}
	s, err := pgstore.New(pool, &pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	inserted := func() int64 {
		var ins int64
		if err := pool.QueryRow(ctx, "SELECT pg_stat_get_tuples_inserted($1::regclass)", tasks).Scan(&ins); err != nil {
			t.Fatalf("pgtest: read statistics: %v", err)
		}
		return ins
	}
	before := inserted()
	const steps, batch = 100, 20
	sh := &durabletype.Shape{}
	for i := range steps {
		sh.Steps = append(sh.Steps, durabletype.StepSpec{Name: fmt.Sprintf("s%03d", i),
			Retry: durabletype.RetryPolicy{MaxAttempts: 1, Factor: 1}})
	}
	for made := 0; made < n; {
		var p store.CreateRunsParams
		for range batch {
			p.Runs = append(p.Runs, store.NewRun{ID: uuid.New(), Workflow: "bloat", Tenant: "t", Input: []byte(`{}`), Shape: sh})
			made += steps
		}
		if _, err := s.CreateRuns(ctx, &p); err != nil {
			t.Fatalf("pgtest: create runs: %v", err)
		}
	}
	// The statistics clamp the live count at zero: were the delete
	// reported before an insert, that insert's rows would count as live
	// for good. So every insert is reported first: the sessions that
	// made them report up to a second later (or after 10s idle).
	for inserted() < before+int64(n) {
		select {
		case <-ctx.Done():
			t.Fatalf("pgtest: the statistics of %s never counted the %d rows inserted", tasks, n)
		case <-time.After(50 * time.Millisecond):
		}
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "DELETE FROM "+runs); err != nil {
		t.Fatalf("pgtest: delete runs: %v", err)
	}
	// A backend reports its statistics at most once a second, or after
	// 10s idle; this makes it report at the end of the next statement.
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatalf("pgtest: flush statistics: %v", err)
	}
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("pgtest: flush statistics: %v", err)
	}
	// Wait until the delete is counted: no live task left, at least n
	// dead.
	for {
		var live, dead int64
		if err := pool.QueryRow(ctx, "SELECT pg_stat_get_live_tuples($1::regclass), pg_stat_get_dead_tuples($1::regclass)",
			tasks).Scan(&live, &dead); err != nil {
			t.Fatalf("pgtest: read statistics: %v", err)
		}
		if live == 0 && dead >= int64(n) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pgtest: the statistics of %s show %d live and %d dead rows, want 0 and at least %d", tasks, live, dead, n)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
