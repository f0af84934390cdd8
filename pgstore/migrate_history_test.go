package pgstore_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// catalogQueries describe a schema ($1) as lines of text, one per object:
// its relations with their kind, columns, options, indexes, constraints,
// triggers, functions and sequences. The schema's name is replaced by
// SCHEMA afterwards (catalogOf), so that two schemas compare.
var catalogQueries = map[string]string{
	"relation": `
SELECT format('%s kind=%s partition=%s partitioned=%s options=%s', c.relname, c.relkind, c.relispartition,
              pg_get_partkeydef(c.oid), coalesce(array_to_string(c.reloptions, ','), ''))
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')`,
	"column": `
SELECT format('%s #%s %s %s collate=%s notnull=%s default=%s identity=%s generated=%s', c.relname,
              row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum), a.attname,
              format_type(a.atttypid, a.atttypmod), coalesce(co.collname, ''), a.attnotnull,
              coalesce(pg_get_expr(d.adbin, d.adrelid), ''), a.attidentity, a.attgenerated)
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 0
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND a.attnum > 0 AND NOT a.attisdropped`,
	"index": `
SELECT format('%s on %s: %s options=%s valid=%s', i.relname, t.relname, pg_get_indexdef(i.oid),
              coalesce(array_to_string(i.reloptions, ','), ''), x.indisvalid)
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = i.relnamespace
WHERE n.nspname = $1`,
	"constraint": `
SELECT format('%s on %s: %s %s deferrable=%s validated=%s local=%s inherited=%s', co.conname,
              coalesce(t.relname, ''), co.contype, pg_get_constraintdef(co.oid),
              co.condeferrable, co.convalidated, co.conislocal, co.coninhcount)
FROM pg_constraint co
JOIN pg_namespace n ON n.oid = co.connamespace
LEFT JOIN pg_class t ON t.oid = co.conrelid
WHERE n.nspname = $1`,
	"trigger": `
SELECT format('%s on %s: %s enabled=%s', tg.tgname, t.relname, pg_get_triggerdef(tg.oid), tg.tgenabled)
FROM pg_trigger tg
JOIN pg_class t ON t.oid = tg.tgrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = $1 AND NOT tg.tgisinternal`,
	"function": `
SELECT format('%s(%s): %s', p.proname, pg_get_function_identity_arguments(p.oid),
              CASE WHEN p.prokind IN ('f', 'p', 'w') THEN pg_get_functiondef(p.oid) ELSE p.prokind::text END)
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = $1`,
	"sequence": `
SELECT format('%s: type=%s start=%s min=%s max=%s increment=%s cycle=%s cache=%s owned_by=%s', c.relname,
              format_type(s.seqtypid, NULL), s.seqstart, s.seqmin, s.seqmax, s.seqincrement, s.seqcycle, s.seqcache,
              coalesce((SELECT t.relname || '.' || a.attname FROM pg_depend d
                        JOIN pg_class t ON t.oid = d.refobjid
                        JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                        WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')), ''))
FROM pg_sequence s
JOIN pg_class c ON c.oid = s.seqrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1`,
}

// catalogOf describes schema as sorted lines ("kind: description"), with
// the schema's name replaced by SCHEMA.
func catalogOf(t *testing.T, pool *pgxpool.Pool, schema string) []string {
	t.Helper()
	var out []string
	for kind, q := range catalogQueries {
		rows, err := pool.Query(ctx, q, schema)
		require.NoError(t, err, kind)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err, kind)
		for _, l := range lines {
			l = strings.ReplaceAll(l, pgx.Identifier{schema}.Sanitize(), "SCHEMA")
			l = strings.ReplaceAll(l, schema, "SCHEMA")
			out = append(out, kind+": "+l)
		}
	}
	slices.Sort(out)
	return out
}

// catalogDiff lists the lines only one of two sorted catalogs has, or ""
// when they are equal.
func catalogDiff(aName string, a []string, bName string, b []string) string {
	var sb strings.Builder
	for _, l := range a {
		if _, found := slices.BinarySearch(b, l); !found {
			fmt.Fprintf(&sb, "  only in %s: %s\n", aName, l)
		}
	}
	for _, l := range b {
		if _, found := slices.BinarySearch(a, l); !found {
			fmt.Fprintf(&sb, "  only in %s: %s\n", bName, l)
		}
	}
	return sb.String()
}

// TestHistoryDownMatches016: migration 017 reverted (after retention made
// period partitions, holding runs) leaves a schema whose catalog is the
// one migration 016 makes: the same tables (plain again, no partition
// left over), columns, indexes, constraints, triggers, functions, storage
// options and sequences, under the same names; the runs the periods held
// are back in the plain tables with their tasks and events.
func TestHistoryDownMatches016(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)

	old := pgtest.EmptySchema(t, pool)
	res, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: old, Direction: pgstore.Up, Steps: 16})
	require.NoError(t, err)
	require.Len(t, res.Versions, 16)
	require.Equal(t, 16, res.Versions[15], "the schema is at 016")

	reverted := pgtest.Schema(t, pool)
	require.Greater(t, len(allVersions(t, pool)), 16, "017 exists")
	s, err := pgstore.New(pool, &pgstore.Config{Schema: reverted})
	require.NoError(t, err)
	now := dbNow(t, pool)
	// Periods as a pass 15 minutes ago made them (two ahead): the current
	// one among them.
	_, err = s.PruneRuns(ctx, &store.PruneRunsParams{Now: now.Add(-15 * time.Minute), OlderThan: time.Hour, Limit: 500, Lazy: true})
	require.NoError(t, err)
	ps := periods(t, pool, reverted)
	require.NotEmpty(t, ps, "retention created period partitions")

	// Runs in a period's partitions (time-ordered ids, one with a key) and
	// one in the default partitions, each with its task and events.
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{step("a")}}
	inPeriod := newRun("wf", "t", sh)
	inPeriod.ID, inPeriod.IdempotencyKey = dag.TimeOrderedID(uuid.New(), now), "key"
	inPeriod2 := newRun("wf", "t", sh)
	inPeriod2.ID = dag.TimeOrderedID(uuid.New(), now)
	legacy := newRun("wf", "t", sh)
	require.NoError(t, created(s.CreateRuns(ctx, &store.CreateRunsParams{Runs: []store.NewRun{inPeriod, inPeriod2, legacy}})))
	var holding string // the period of now
	for _, p := range ps {
		if p.Lo.String() <= inPeriod.ID.String() && inPeriod.ID.String() < p.Hi.String() {
			holding = p.Suffix
		}
	}
	require.NotEmpty(t, holding, "a period holds now")
	require.Equal(t, reverted+".runs_"+holding, partitionOf(t, pool, reverted, "runs", inPeriod.ID))
	require.Equal(t, reverted+".runs_default", partitionOf(t, pool, reverted, "runs", legacy.ID))
	counts := func() [3]int {
		var n [3]int
		for i, table := range []string{"runs", "tasks", "events"} {
			require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{reverted, table}.Sanitize()).Scan(&n[i]))
		}
		return n
	}
	before := counts()
	require.Equal(t, 3, before[0])
	// A drop that detached and renamed the last (empty) period's partitions
	// and died before dropping them: the down drops them too.
	last := ps[len(ps)-1]
	require.NotEqual(t, holding, last.Suffix)
	id := pgx.Identifier{reverted}.Sanitize()
	for _, table := range []string{"runs", "tasks", "events"} {
		part := table + "_" + last.Suffix
		for _, q := range []string{
			`ALTER TABLE ` + id + `.` + table + ` DETACH PARTITION ` + id + `.` + part,
			`ALTER TABLE ` + id + `.` + part + ` RENAME TO ` + part + `_gone`,
		} {
			_, err := pool.Exec(ctx, q)
			require.NoError(t, err, q)
		}
	}
	_, err = pool.Exec(ctx, `DELETE FROM `+id+`.history_partitions WHERE suffix = $1`, last.Suffix)
	require.NoError(t, err)
	require.Len(t, goneTables(t, pool, reverted), 3)

	above := allVersions(t, pool)[16:] // 017 and the migrations after it
	res, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: reverted, Direction: pgstore.Down, Steps: len(above)})
	require.NoError(t, err)
	slices.Reverse(above)
	require.Equal(t, above, res.Versions)
	require.Equal(t, before, counts(), "every run, task and event is back in the plain tables")
	var key string
	require.NoError(t, pool.QueryRow(ctx, "SELECT idem_key FROM "+pgx.Identifier{reverted, "runs"}.Sanitize()+" WHERE id = $1", inPeriod.ID).Scan(&key))
	require.Equal(t, "key", key)

	want, got := catalogOf(t, pool, old), catalogOf(t, pool, reverted)
	for kind := range catalogQueries {
		require.True(t, slices.ContainsFunc(want, func(l string) bool { return strings.HasPrefix(l, kind+": ") }),
			"016's catalog lists some %s", kind)
	}
	if diff := catalogDiff("016", want, "017 reverted", got); diff != "" {
		t.Fatalf("017's down migration does not restore 016's schema:\n%s", diff)
	}
}

// TestHistoryFreeConstraintsAcrossMigrations: a constraint that a period's
// creation left on a default partition (its process died between the
// constraint and the attach) is dropped by migration 017's down, where
// it would refuse the runs of that range once the clock reaches it; one
// that a down by older code left on a plain table is dropped by 017's up,
// which would copy it onto the partitioned table; and a pass drops one
// that the partitioned table holds (and its partition inherits).
func TestHistoryFreeConstraintsAcrossMigrations(t *testing.T) {
	t.Parallel()
	s, pool, schema := setup(t)
	_, err := s.PruneRuns(ctx, &store.PruneRunsParams{OlderThan: time.Hour, Limit: 500, Lazy: true})
	require.NoError(t, err)
	require.NotEmpty(t, periods(t, pool, schema))
	id := pgx.Identifier{schema}.Sanitize()
	lo, hi := "ffff0000-0000-0000-0000-000000000000", "ffff1000-0000-0000-0000-000000000000" // far ahead
	add := func(table, name, key string) {
		t.Helper()
		_, err := pool.Exec(ctx, `ALTER TABLE `+id+`.`+table+` ADD CONSTRAINT `+name+` CHECK (`+key+` < '`+lo+`' OR `+key+` >= '`+hi+`')`)
		require.NoError(t, err)
	}
	free := func() []string {
		return names(t, pool, `SELECT r.relname || '.' || c.conname FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid
JOIN pg_namespace n ON n.oid = r.relnamespace WHERE n.nspname = $1 AND c.conname LIKE '%\_free\_%' ORDER BY 1`, schema)
	}
	for _, table := range []string{"runs", "tasks", "events"} {
		key := "run_id"
		if table == "runs" {
			key = "id"
		}
		add(table+"_default", table+"_default_free_p20990101t000000", key)
	}
	require.Len(t, free(), 3)

	_, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema, Direction: pgstore.Down, Steps: len(allVersions(t, pool)) - 16})
	require.NoError(t, err)
	require.Empty(t, free(), "017's down drops them")

	// What a down by older code left: a constraint on the plain table.
	add("runs", "runs_default_free_p20990101t000000", "id")
	_, err = pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema})
	require.NoError(t, err)
	require.Empty(t, free(), "017's up drops it before it makes the partitioned tables like the plain ones")

	// What 017's up before this fix made of it: the partitioned table's
	// constraint, inherited by its default partition. A pass drops both.
	add("runs", "runs_default_free_p20990101t000000", "id")
	require.Equal(t, []string{"runs.runs_default_free_p20990101t000000", "runs_default.runs_default_free_p20990101t000000"}, free())
	_, err = s.PruneRuns(ctx, &store.PruneRunsParams{Now: dbNow(t, pool).Add(24 * time.Hour), OlderThan: time.Hour, Limit: 500, Lazy: true})
	require.NoError(t, err)
	require.Empty(t, free())
}
