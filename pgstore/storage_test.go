package pgstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/bloat"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

// tableOf returns the figures of the named table, failing without it.
func tableOf(t *testing.T, st *durabletype.Storage, name string) durabletype.TableStorage {
	t.Helper()
	for _, tb := range st.Tables {
		if tb.Name == name {
			return tb
		}
	}
	t.Fatalf("no table %q in %+v", name, st.Tables)
	return durabletype.TableStorage{}
}

// TestStorage: the store reads the tables of its own schema from the
// catalog, with their sizes and the server's settings; the dead rows a
// deletion leaves in a table without autovacuum show in its figures, and
// the core's rule flags that table and no other.
func TestStorage(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	other := pgtest.Schema(t, pool) // another store's tables are not listed
	_, err := pool.Exec(ctx, "CREATE TABLE "+pgx.Identifier{other, "only_there"}.Sanitize()+" (id int)")
	require.NoError(t, err)

	st, err := s.Storage(ctx)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), st.At, time.Minute)
	require.True(t, st.TrackCounts)
	var server bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_setting('autovacuum')::boolean").Scan(&server))
	require.Equal(t, server, st.Autovacuum)
	names := make([]string, len(st.Tables))
	for i, tb := range st.Tables {
		names[i] = tb.Name
		require.Positive(t, tb.TotalBytes, tb.Name)
		require.Equal(t, tb.TotalBytes, tb.TableBytes+tb.IndexBytes, tb.Name)
		require.True(t, tb.Autovacuum, tb.Name)
	}
	require.IsIncreasing(t, names)
	require.Subset(t, names, []string{"runs", "tasks"})
	require.NotContains(t, names, "only_there")
	require.Zero(t, tableOf(t, st, "tasks").DeadRows)

	pgtest.DeadTasks(t, pool, schema, 12_000)
	// The deleting session reported its statistics; another backend may
	// read a snapshot of them taken a moment before: polled with a
	// deadline.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err = s.Storage(ctx)
		require.NoError(t, err)
		if tableOf(t, st, "tasks").DeadRows >= 12_000 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the dead tasks never showed: %+v", tableOf(t, st, "tasks"))
	}
	tasks := tableOf(t, st, "tasks")
	require.False(t, tasks.Autovacuum)
	require.Zero(t, tasks.LiveRows)
	require.InDelta(t, 1.0, tasks.DeadFraction(), 0.01)
	require.Empty(t, tasks.Attention, "the store judges nothing")

	bloat.Judge(st)
	require.Contains(t, tableOf(t, st, "tasks").Attention, "dead rows (100%)")
	require.Contains(t, tableOf(t, st, "tasks").Attention, "autovacuum is off")
	require.Empty(t, tableOf(t, st, "workers").Attention)
}

// TestStoragePeriodsBetweenStates: a history period's tables count as
// their partitioned table's while they are being made (not attached yet)
// or dropped (detached and renamed *_gone), so that the tables listed,
// and the metrics labelled by them, do not come and go with the periods;
// a table of the schema that only looks alike is listed as itself.
func TestStoragePeriodsBetweenStates(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	id := pgx.Identifier{schema}.Sanitize()
	for _, q := range []string{
		`CREATE TABLE ` + id + `.runs_p20990101t000000 (LIKE ` + id + `.runs INCLUDING INDEXES)`,
		`CREATE TABLE ` + id + `.tasks_p20990101t000000_gone (LIKE ` + id + `.tasks INCLUDING INDEXES)`,
		`CREATE TABLE ` + id + `.runs_p2099 (x int)`,
	} {
		_, err := pool.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	st, err := s.Storage(ctx)
	require.NoError(t, err)
	var names []string
	for _, tb := range st.Tables {
		names = append(names, tb.Name)
	}
	require.NotContains(t, names, "runs_p20990101t000000")
	require.NotContains(t, names, "tasks_p20990101t000000_gone")
	require.Contains(t, names, "runs_p2099")
	require.Contains(t, names, "runs")
	require.Contains(t, names, "tasks")
}

// TestStorageEmptySchema: a schema without tables reads as none, with the
// server's settings.
func TestStorageEmptySchema(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	_, err := pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	require.NoError(t, err)
	st, err := s.Storage(ctx)
	require.NoError(t, err)
	require.Empty(t, st.Tables)
	require.True(t, st.TrackCounts)
	require.False(t, st.At.IsZero())
}
