package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// checkRef compares d0's tables (built in walproto_d0_check) with a schema
// migrated by the engine (durable migrate up --schema NAME): the columns
// (name, type, default, nullability, collation) and the indexes (their
// definitions, schema and partition names aside) of runs, tasks and ready,
// and the storage options, of the partitions runs_default and
// tasks_default there.
func checkRef(ctx context.Context, c *config, mon *pgx.Conn) error {
	d, _ := designByName("d0")
	mine := "walproto_d0_check"
	sid := pgx.Identifier{mine}.Sanitize()
	if _, err := mon.Exec(ctx, "DROP SCHEMA IF EXISTS "+sid+" CASCADE; CREATE SCHEMA "+sid+"; "+renderDDL(d.ddl, mine)); err != nil {
		return err
	}
	defer mon.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+sid+" CASCADE")
	pairs := [][2]string{{"runs", "runs_default"}, {"tasks", "tasks_default"}, {"ready", "ready"}, {"lanes", "lanes"}, {"frontier", "frontier"}, {"run_counts", "run_counts"}}
	bad := 0
	for _, p := range pairs {
		a, err := describe(ctx, mon, mine, p[0], p[0])
		if err != nil {
			return err
		}
		b, err := describe(ctx, mon, c.checkRef, p[1], p[0])
		if err != nil {
			return err
		}
		for _, l := range a {
			if !slices.Contains(b, l) {
				fmt.Printf("%s: only in walproto d0:  %s\n", p[0], l)
				bad++
			}
		}
		for _, l := range b {
			if !slices.Contains(a, l) {
				fmt.Printf("%s: only in %s.%s: %s\n", p[0], c.checkRef, p[1], l)
				bad++
			}
		}
		fmt.Printf("%s: %d columns, indexes and options compared\n", p[0], len(a))
	}
	if bad > 0 {
		return fmt.Errorf("%d differences", bad)
	}
	fmt.Println("d0 matches", c.checkRef)
	return nil
}

// describe lists a table's columns, indexes and options as comparable
// lines, with the table's name as as.
func describe(ctx context.Context, mon *pgx.Conn, schema, table, as string) ([]string, error) {
	var out []string
	rows, err := mon.Query(ctx, `
SELECT 'column ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END ||
       coalesce(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '') || coalesce(' COLLATE ' || nullif(co.collname, 'default'), '')
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
LEFT JOIN pg_collation co ON co.oid = a.attcollation
WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'index ' || regexp_replace(regexp_replace(pg_get_indexdef(i.indexrelid), ' ON (ONLY )?\S+ ', ' ON T '), 'INDEX \S+ ', 'INDEX ')
FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2
UNION ALL
SELECT 'option ' || o FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, unnest(c.reloptions) o
WHERE n.nspname = $1 AND c.relname = $2`, schema, table)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, l)
	}
	rows.Close()
	if len(out) == 0 {
		return nil, fmt.Errorf("no table %s.%s", schema, table)
	}
	slices.Sort(out)
	_ = as
	return out, rows.Err()
}

// explainClaims builds each design on a queue of a few thousand runs and
// prints the claim's plan, to check that it walks the queue's index.
func explainClaims(ctx context.Context, c *config, mon *pgx.Conn) error {
	for _, name := range c.designs {
		d, ok := designByName(name)
		if !ok {
			return fmt.Errorf("no design %q", name)
		}
		schema := "walproto_" + d.name
		sid := pgx.Identifier{schema}.Sanitize()
		if _, err := mon.Exec(ctx, "DROP SCHEMA IF EXISTS "+sid+" CASCADE; CREATE SCHEMA "+sid+"; "+renderDDL(d.ddl, schema)); err != nil {
			return err
		}
		w := &workload{c: c, d: d, st: newStmts(d, schema), xids: map[uint32]string{}}
		if _, err := mon.Exec(ctx, `INSERT INTO `+sid+`.lanes (workflow, tenant, grp, last_block) VALUES ($1, $2, 0, 0)`, w.workflow(), c.stepTenant); err != nil {
			return err
		}
		conn, err := connect(ctx, c, "walproto-explain", "")
		if err != nil {
			return err
		}
		if err := w.create(ctx, conn, 5000); err != nil {
			return err
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "+w.st.claim, c.workflows, 200, "w", nil, nil)
		if err != nil {
			return err
		}
		fmt.Println("==", d.name)
		for rows.Next() {
			var l string
			rows.Scan(&l)
			fmt.Println(l)
		}
		rows.Close()
		tx.Rollback(ctx)
		conn.Close(ctx)
		if err := rows.Err(); err != nil {
			return err
		}
		mon.Exec(ctx, "DROP SCHEMA IF EXISTS "+sid+" CASCADE")
	}
	_ = strings.ToLower
	return nil
}
