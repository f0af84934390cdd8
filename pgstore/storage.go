package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

var _ store.StorageReader = (*Store)(nil)

// storageSQL reads the storage figures of every table of the schema named
// by $1 (a parameter, never spliced into the text) from the catalog and
// the statistics views, with the server's autovacuum and track_counts
// settings, in one statement. It lists the tables the catalog has rather
// than a list of its own, so that whatever tables a migration adds (or
// partitions) are read too. A partitioned table (the history's: runs,
// tasks, events; migration 017) reads as one, the sum of its partitions:
// its periods come and go, the table stays. The one-row left join returns
// the settings even for a schema without tables.
//
// The sizes are the size functions' (pg_total_relation_size: heap, TOAST
// and indexes; pg_table_size: heap and TOAST; pg_indexes_size), which take
// no lock and stat the relations' files; a relation dropped meanwhile
// reads as NULL, counted 0. The row counts and times are the cumulative
// statistics' (n_live_tup, n_dead_tup, last_vacuum, ... of
// pg_stat_all_tables, as autovacuum sees them), read with the functions
// behind that view for the schema's tables only: the view computes them
// for every table of the database before any filter, which costs 2-3
// times the whole query on a database of 1,400 relations.
var storageSQL = `
SELECT now(), current_setting('autovacuum')::boolean, current_setting('track_counts')::boolean,
       t.name, '', t.live, t.dead, t.total, t.heap, t.indexes,
       t.last_vacuum, t.last_autovacuum, t.last_analyze, t.last_autoanalyze, t.autovacuum
FROM (SELECT 1) AS one
LEFT JOIN (
    SELECT ` + CountsAs("c", "p") + ` AS name,
           sum(pg_stat_get_live_tuples(c.oid))::int8 AS live,
           sum(pg_stat_get_dead_tuples(c.oid))::int8 AS dead,
           sum(coalesce(pg_total_relation_size(c.oid), 0))::int8 AS total,
           sum(coalesce(pg_table_size(c.oid), 0))::int8 AS heap,
           sum(coalesce(pg_indexes_size(c.oid), 0))::int8 AS indexes,
           max(pg_stat_get_last_vacuum_time(c.oid)) AS last_vacuum,
           max(pg_stat_get_last_autovacuum_time(c.oid)) AS last_autovacuum,
           max(pg_stat_get_last_analyze_time(c.oid)) AS last_analyze,
           max(pg_stat_get_last_autoanalyze_time(c.oid)) AS last_autoanalyze,
           bool_and(coalesce((SELECT o.option_value::boolean FROM pg_options_to_table(c.reloptions) AS o
                              WHERE o.option_name = 'autovacuum_enabled'), true)) AS autovacuum
    FROM pg_class AS c
    JOIN pg_namespace AS n ON n.oid = c.relnamespace
    LEFT JOIN pg_inherits AS i ON i.inhrelid = c.oid
    LEFT JOIN pg_class AS p ON p.oid = i.inhparent
    WHERE n.nspname = $1 AND c.relkind IN ('r', 'm')
    GROUP BY 1
) AS t ON true
ORDER BY t.name`

// CountsAs is the SQL expression naming the table that the relation
// aliased rel (of pg_class) counts as, parent being its partitioned table
// (through pg_inherits; NULL for none): a history period's partition
// counts as its partitioned table, even while it is being made (not yet
// attached) or dropped (detached, renamed *_gone), so that storage
// figures and metric labels do not come and go with the periods
// (history.go).
func CountsAs(rel, parent string) string {
	return fmt.Sprintf(`CASE WHEN %[1]s.relname ~ '^(runs|tasks|events)_p[0-9]{8}t[0-9]{6}(_gone)?$' `+
		`THEN substring(%[1]s.relname::text FROM '^(runs|tasks|events)_') `+
		`ELSE coalesce(%[2]s.relname::text, %[1]s.relname::text) END`, rel, parent)
}

// Storage implements store.StorageReader: the storage figures of every
// table of the store's schema, read from PostgreSQL's catalog in one
// statement. The figures are the server's statistics, which backends
// report at most once a second (or when idle): a change shows in them a
// moment after it commits.
func (s *Store) Storage(ctx context.Context) (*durabletype.Storage, error) {
	rows, err := s.pool.Query(ctx, storageSQL, s.schema)
	if err != nil {
		return nil, classify(fmt.Errorf("pgstore: storage: %w", err))
	}
	defer rows.Close()
	out := &durabletype.Storage{}
	for rows.Next() {
		var (
			name, partitionOf                   pgtype.Text
			live, dead, total, heap, indexes    pgtype.Int8
			vacuum, autovacuum, analyze, autoan pgtype.Timestamptz
			tableAutovacuum                     pgtype.Bool
		)
		if err := rows.Scan(&out.At, &out.Autovacuum, &out.TrackCounts, &name, &partitionOf, &live, &dead, &total, &heap,
			&indexes, &vacuum, &autovacuum, &analyze, &autoan, &tableAutovacuum); err != nil {
			return nil, fmt.Errorf("pgstore: storage: %w", err)
		}
		if !name.Valid { // the schema has no table
			continue
		}
		out.Tables = append(out.Tables, durabletype.TableStorage{
			Name: name.String, PartitionOf: partitionOf.String,
			LiveRows: live.Int64, DeadRows: dead.Int64,
			TotalBytes: total.Int64, TableBytes: heap.Int64, IndexBytes: indexes.Int64,
			LastVacuum: tm(vacuum), LastAutovacuum: tm(autovacuum), LastAnalyze: tm(analyze), LastAutoanalyze: tm(autoan),
			Autovacuum: tableAutovacuum.Bool,
		})
	}
	if err := rows.Err(); err != nil {
		return nil, classify(fmt.Errorf("pgstore: storage: %w", err))
	}
	out.At = out.At.In(time.UTC)
	return out, nil
}
