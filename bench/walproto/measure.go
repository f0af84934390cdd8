package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// result is one measurement: a design, a scenario, the WAL of its two
// phases.
type result struct {
	Design, Scenario, Compression string
	Desc                          string
	Runs, Tasks                   int
	At                            time.Time
	Insert, Work                  phase
	// Statistics of the work phase's updates (pg_stat_user_tables).
	TasksUpdates, TasksHOT, RunsUpdates, RunsHOT int64
	Claims, Finishes, Creates                    int
	Enqueued, Settled                            int
	Problem                                      string
	WorkSeconds, InsertSeconds                   float64
}

// phase is the WAL of one phase: the LSN distance, and the records read
// back, this program's (by operation, relation and record type) apart
// from other sessions'.
type phase struct {
	From, To string
	Delta    int64 // bytes between the positions
	Own      int64 // record bytes (with FPIs) of this program's transactions and relations
	OwnFPI   int64
	Foreign  int64 // record bytes of everything else
	Checkpts int   // checkpoint records in the range
	Groups   []group
}

type group struct {
	Op, Rel, Type   string
	N, Bytes, FPI   int64
	RelKind, Parent string
}

// ownTotal is this program's share of the phase's bytes, page headers
// and alignment included pro rata (as durable bench --wal counts them).
func (p *phase) ownTotal() float64 {
	if p.Own+p.Foreign == 0 {
		return float64(p.Delta)
	}
	return float64(p.Delta) * float64(p.Own) / float64(p.Own+p.Foreign)
}

func (p *phase) foreignShare() float64 {
	if p.Own+p.Foreign == 0 {
		return 0
	}
	return float64(p.Foreign) / float64(p.Own+p.Foreign)
}

func lsn(ctx context.Context, conn *pgx.Conn) (string, error) {
	var s string
	err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&s)
	return s, err
}

// waitQuiet waits for a period of c.quiet in which the server wrote under
// c.quietBytes of WAL (other sessions' work changes which pages are
// imaged, and mixes its records with ours).
func waitQuiet(ctx context.Context, c *config, mon *pgx.Conn) error {
	if c.quiet <= 0 {
		return nil
	}
	start := time.Now()
	for {
		var a, b string
		if err := mon.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&a); err != nil {
			return err
		}
		time.Sleep(c.quiet)
		var d int64
		if err := mon.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text, pg_current_wal_insert_lsn() - $1::pg_lsn`, a).Scan(&b, &d); err != nil {
			return err
		}
		if d < c.quietBytes {
			return nil
		}
		if time.Since(start) > 2*time.Minute && int(time.Since(start)/time.Minute)%2 == 0 {
			fmt.Printf("  waiting for a quiet server: %d B of WAL in %s\n", d, c.quiet)
		}
	}
}

// relName names the files of the schema's relations ("SPC/DB/NODE").
func relNames(ctx context.Context, mon *pgx.Conn, schema string) (map[string][3]string, error) {
	rows, err := mon.Query(ctx, `
SELECT coalesce(nullif(c.reltablespace, 0), d.dattablespace)::text || '/' || d.oid::text || '/' || pg_relation_filenode(c.oid)::text,
       CASE WHEN c.relkind = 't' THEN coalesce((SELECT o.relname FROM pg_class o WHERE o.reltoastrelid = c.oid), '?') || ' (TOAST)'
            WHEN c.relkind = 'i' AND tc.relkind = 't' THEN coalesce((SELECT o.relname FROM pg_class o WHERE o.reltoastrelid = tc.oid), '?') || ' (TOAST index)'
            ELSE c.relname END,
       c.relkind::text, coalesce(tc.relname, c.relname)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
CROSS JOIN (SELECT oid, dattablespace FROM pg_database WHERE datname = current_database()) d
LEFT JOIN pg_index i ON i.indexrelid = c.oid
LEFT JOIN pg_class tc ON tc.oid = i.indrelid
WHERE (n.nspname = $1 OR (n.nspname = 'pg_toast' AND (c.oid IN (SELECT reltoastrelid FROM pg_class x JOIN pg_namespace xn ON xn.oid = x.relnamespace WHERE xn.nspname = $1)
                                                  OR tc.oid IN (SELECT reltoastrelid FROM pg_class x JOIN pg_namespace xn ON xn.oid = x.relnamespace WHERE xn.nspname = $1))))
  AND pg_relation_filenode(c.oid) IS NOT NULL`, schema)
	if err != nil {
		return nil, err
	}
	out := map[string][3]string{}
	for rows.Next() {
		var file, name, kind, parent string
		if err := rows.Scan(&file, &name, &kind, &parent); err != nil {
			rows.Close()
			return nil, err
		}
		kind = map[string]string{"r": "table", "i": "index", "S": "sequence", "t": "TOAST"}[kind]
		out[file] = [3]string{name, kind, parent}
	}
	rows.Close()
	return out, rows.Err()
}

// readBack reads the phase's records (pg_walinspect), once the server has
// flushed them, and sums them by transaction, relation and record type.
func readBack(ctx context.Context, c *config, mon *pgx.Conn, rels map[string][3]string, xids map[uint32]string, p *phase) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok bool
		if err := mon.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, p.To).Scan(&ok); err != nil {
			return err
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("WAL up to %s not flushed", p.To)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := mon.QueryRow(ctx, `SELECT $2::pg_lsn - $1::pg_lsn`, p.From, p.To).Scan(&p.Delta); err != nil {
		return err
	}
	fn := pgx.Identifier{c.inspectSchema, "pg_get_wal_records_info"}.Sanitize()
	rows, err := mon.Query(ctx, `
SELECT xid::text::bigint, resource_manager, record_type,
       coalesce(substring(block_ref FROM '^blkref #0: rel ([0-9]+/[0-9]+/[0-9]+)'), ''),
       coalesce(substring(block_ref FROM '^blkref #0: rel [0-9]+/[0-9]+/[0-9]+ fork ([a-z_]+)'), 'main'),
       count(*), sum(record_length - fpi_length), sum(fpi_length)
FROM `+fn+`($1::pg_lsn, $2::pg_lsn)
GROUP BY 1, 2, 3, 4, 5`, p.From, p.To)
	if err != nil {
		return fmt.Errorf("reading the WAL back: %w", err)
	}
	type key struct{ op, rel, typ string }
	sums := map[key]*group{}
	for rows.Next() {
		var xid int64
		var rmgr, rtype, file, fork string
		var n, bytes, fpi int64
		if err := rows.Scan(&xid, &rmgr, &rtype, &file, &fork, &n, &bytes, &fpi); err != nil {
			rows.Close()
			return err
		}
		if rmgr == "XLOG" && strings.HasPrefix(rtype, "CHECKPOINT") {
			p.Checkpts += int(n)
		}
		rel, mine := rels[file]
		op, ownX := xids[uint32(xid)]
		switch {
		case xid != 0 && ownX:
		case xid == 0 && mine:
			op = "no transaction"
		default:
			p.Foreign += bytes + fpi
			continue
		}
		name := rel[0]
		switch {
		case file == "":
			name = "(none)"
		case !mine:
			name = "other relation " + file
		}
		if fork != "main" {
			name += " (" + fork + ")"
		}
		k := key{op, name, rmgr + " " + rtype}
		g := sums[k]
		if g == nil {
			g = &group{Op: op, Rel: name, Type: rmgr + " " + rtype, RelKind: rel[1], Parent: rel[2]}
			sums[k] = g
		}
		g.N += n
		g.Bytes += bytes
		g.FPI += fpi
		p.Own += bytes + fpi
		p.OwnFPI += fpi
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, g := range sums {
		p.Groups = append(p.Groups, *g)
	}
	slices.SortFunc(p.Groups, func(a, b group) int { return cmp.Compare(b.Bytes+b.FPI, a.Bytes+a.FPI) })
	return nil
}

// measure builds the design's schema, creates the runs, checkpoints,
// works them, and reads both phases' WAL back.
func measure(ctx context.Context, c *config, mon *pgx.Conn, d design, scenario string) (*result, error) {
	schema := "walproto_" + d.name
	res := &result{Design: d.name, Scenario: scenario, Compression: c.compress, Desc: d.desc, At: time.Now().UTC()}
	w := &workload{c: c, d: d, st: newStmts(d, schema), dag: scenario == "dag", xids: map[uint32]string{}}
	res.Runs = c.runs
	if w.dag {
		res.Runs = c.dagRuns
	}
	res.Tasks = res.Runs * len(w.names())
	fmt.Printf("== %s %s (%d runs, %d tasks%s)\n", d.name, scenario, res.Runs, res.Tasks, map[bool]string{true: ", wal_compression " + c.compress}[c.compress != ""])
	sid := pgx.Identifier{schema}.Sanitize()
	if _, err := mon.Exec(ctx, "DROP SCHEMA IF EXISTS "+sid+" CASCADE; CREATE SCHEMA "+sid); err != nil {
		return nil, err
	}
	if !c.keep {
		defer mon.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+sid+" CASCADE")
	}
	if _, err := mon.Exec(ctx, renderDDL(d.ddl, schema)); err != nil {
		return nil, fmt.Errorf("DDL: %w", err)
	}
	// The lane exists (ensureLanes ran for earlier batches): grp 0.
	if _, err := mon.Exec(ctx, `INSERT INTO `+sid+`.lanes (workflow, tenant, grp, last_block) VALUES ($1, $2, 0, 0)`, w.workflow(), c.stepTenant); err != nil {
		return nil, err
	}
	rels, err := relNames(ctx, mon, schema)
	if err != nil {
		return nil, err
	}
	// A temporary physical slot holds the WAL until it is read back.
	slot, err := connect(ctx, c, "walproto-slot", "")
	if err != nil {
		return nil, err
	}
	defer slot.Close(context.WithoutCancel(ctx))
	if _, err := slot.Exec(ctx, `SELECT pg_create_physical_replication_slot('walproto_' || pg_backend_pid(), true, true)`); err != nil {
		return nil, fmt.Errorf("replication slot: %w", err)
	}
	var conns [3]*pgx.Conn
	for i, app := range []string{"walproto-create", "walproto-claim", "walproto-finish"} {
		if conns[i], err = connect(ctx, c, app, c.compress); err != nil {
			return nil, err
		}
	}
	closeConns := func() {
		for i, conn := range conns {
			if conn != nil {
				conn.Close(context.WithoutCancel(ctx))
				conns[i] = nil
			}
		}
	}
	defer closeConns()
	var baseUpd, baseHOT, baseRUpd, baseRHOT int64
	if err := waitQuiet(ctx, c, mon); err != nil {
		return nil, err
	}

	// Insert phase.
	res.Insert.From, err = lsn(ctx, mon)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := w.create(ctx, conns[0], res.Runs); err != nil {
		return nil, err
	}
	res.InsertSeconds = time.Since(t0).Seconds()
	if res.Insert.To, err = lsn(ctx, mon); err != nil {
		return nil, err
	}
	// Statistics (the table's counters, read before and after the work).
	if _, err := mon.Exec(ctx, `ANALYZE `+sid+`.runs, `+sid+`.tasks`); err != nil {
		return nil, err
	}
	readStats := func() (upd, hot, rupd, rhot int64, err error) {
		err = mon.QueryRow(ctx, `SELECT
  (SELECT n_tup_upd FROM pg_stat_user_tables WHERE relid = '`+sid+`.tasks'::regclass),
  (SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = '`+sid+`.tasks'::regclass),
  (SELECT n_tup_upd FROM pg_stat_user_tables WHERE relid = '`+sid+`.runs'::regclass),
  (SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = '`+sid+`.runs'::regclass)`).Scan(&upd, &hot, &rupd, &rhot)
		return
	}
	if baseUpd, baseHOT, baseRUpd, baseRHOT, err = readStats(); err != nil {
		return nil, err
	}
	if _, err := mon.Exec(ctx, `CHECKPOINT`); err != nil {
		return nil, err
	}

	// Work phase.
	if res.Work.From, err = lsn(ctx, mon); err != nil {
		return nil, err
	}
	t0 = time.Now()
	if err := w.work(ctx, conns[1], conns[2]); err != nil {
		return nil, err
	}
	res.WorkSeconds = time.Since(t0).Seconds()
	if res.Work.To, err = lsn(ctx, mon); err != nil {
		return nil, err
	}
	closeConns() // their statistics are flushed when they exit
	res.Claims, res.Finishes, res.Creates, res.Enqueued, res.Settled = w.claims, w.finishes, w.creates, w.enqueued, w.settled
	var notDone int
	if err := mon.QueryRow(ctx, `SELECT count(*) FROM `+sid+`.runs WHERE status <> 'COMPLETED'`).Scan(&notDone); err != nil {
		return nil, err
	}
	if notDone > 0 || w.finished != res.Tasks || w.settled != res.Runs {
		return nil, fmt.Errorf("%d runs not completed, %d of %d tasks finished, %d runs settled", notDone, w.finished, res.Tasks, w.settled)
	}
	time.Sleep(1500 * time.Millisecond)
	upd, hot, rupd, rhot, err := readStats()
	if err != nil {
		return nil, err
	}
	res.TasksUpdates, res.TasksHOT, res.RunsUpdates, res.RunsHOT = upd-baseUpd, hot-baseHOT, rupd-baseRUpd, rhot-baseRHOT

	for _, p := range []*phase{&res.Insert, &res.Work} {
		if err := readBack(ctx, c, mon, rels, w.xids, p); err != nil {
			return nil, err
		}
		if p.foreignShare() > c.maxForeignShare {
			res.Problem += fmt.Sprintf("other sessions wrote %.1f%% of the records of a phase; ", 100*p.foreignShare())
		}
	}
	if res.Work.Checkpts > 0 {
		res.Problem += fmt.Sprintf("%d checkpoint record(s) inside the work phase (more FPIs than one checkpoint gives); ", res.Work.Checkpts)
	}
	return res, nil
}

// print writes the measurement's summary, by operation and by relation.
func (r *result) print(out io.Writer, verbose bool) {
	per := float64(r.Runs)
	unit := "run"
	if r.Scenario == "dag" {
		per, unit = float64(r.Tasks), "task"
	}
	ins, wk := r.Insert.ownTotal()/per, r.Work.ownTotal()/per
	fmt.Fprintf(out, "%s %s%s: insert %.0f B/%s, work %.0f B/%s (FPI %.0f), total %.0f B/%s\n",
		r.Design, r.Scenario, map[bool]string{true: " wal_compression=" + r.Compression}[r.Compression != ""],
		ins, unit, wk, unit, float64(r.Work.OwnFPI)/per, ins+wk, unit)
	fmt.Fprintf(out, "  %d creates, %d claims (%.0f tasks each), %d finishes (%.0f outcomes each); insert %.1fs, work %.1fs\n",
		r.Creates, r.Claims, float64(r.Tasks)/float64(max(r.Claims, 1)), r.Finishes, float64(r.Tasks)/float64(max(r.Finishes, 1)), r.InsertSeconds, r.WorkSeconds)
	fmt.Fprintf(out, "  updates of the work phase: tasks %d (%d HOT), runs %d (%d HOT)\n", r.TasksUpdates, r.TasksHOT, r.RunsUpdates, r.RunsHOT)
	for _, ph := range []struct {
		name string
		p    *phase
	}{{"insert", &r.Insert}, {"work", &r.Work}} {
		p := ph.p
		fmt.Fprintf(out, "  %s phase %s..%s: %d B (%.0f B/%s of ours with page headers pro rata; records %.0f, FPI %.0f); others' records %.2f%%, checkpoints %d\n",
			ph.name, p.From, p.To, p.Delta, p.ownTotal()/per, unit, float64(p.Own)/per, float64(p.OwnFPI)/per, 100*p.foreignShare(), p.Checkpts)
		// By operation and relation.
		type k struct{ op, rel string }
		agg := map[k]*group{}
		var keys []k
		for _, g := range p.Groups {
			kk := k{g.Op, g.Rel}
			if agg[kk] == nil {
				agg[kk] = &group{Op: g.Op, Rel: g.Rel}
				keys = append(keys, kk)
			}
			agg[kk].N += g.N
			agg[kk].Bytes += g.Bytes
			agg[kk].FPI += g.FPI
		}
		slices.SortFunc(keys, func(a, b k) int {
			return cmp.Or(strings.Compare(a.op, b.op), cmp.Compare(agg[b].Bytes+agg[b].FPI, agg[a].Bytes+agg[a].FPI))
		})
		for _, kk := range keys {
			g := agg[kk]
			if (g.Bytes+g.FPI)/int64(per) < 1 && !verbose {
				continue
			}
			fmt.Fprintf(out, "    %-8s %-34s %7.1f B/%s (FPI %5.1f)  %5.2f rec/%s\n", g.Op, g.Rel, float64(g.Bytes+g.FPI)/per, unit, float64(g.FPI)/per, float64(g.N)/per, unit)
		}
		if verbose {
			for _, g := range p.Groups {
				fmt.Fprintf(out, "      %-8s %-34s %-22s %7.1f B/%s (FPI %5.1f) %5.2f rec/%s\n", g.Op, g.Rel, g.Type, float64(g.Bytes+g.FPI)/per, unit, float64(g.FPI)/per, float64(g.N)/per, unit)
			}
		}
	}
	if r.Problem != "" {
		fmt.Fprintf(out, "  PROBLEM: %s\n", r.Problem)
	}
}
