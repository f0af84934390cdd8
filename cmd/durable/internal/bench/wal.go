package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectivelabs/durable/pgstore"
)

// WAL attribution (Options.WAL, `durable bench --wal`) for the single, dag
// and func scenarios: the server's WAL position is read before the inserts,
// after them, after the checkpoint that precedes the work, and once every
// run has settled. The bytes between are the phases' WAL, per run (and per
// task, or per step). With pg_walinspect, each phase's records are read back and summed
// in SQL by transaction, relation and record type: the relation is the
// first block reference of a record ("rel SPC/DB/RELFILENODE fork F"), named
// from pg_class for the bench schema's tables, indexes and TOAST; full-page
// images (FPI) are counted apart from the rest of the record, since they
// depend on when the last checkpoint was. Each transaction is classed by
// what it writes (walClassSQL): that is what attributes a byte to an
// operation, create, claim, finish, settle, counts or events
// (walOperation), where pg_stat_statements' wal_bytes is not available.
//
// The WAL is the server's, not the database's: anything else the server
// does meanwhile is counted in the totals too; the attribution shows it
// apart (others: transactions writing none of the schema's relations, and
// checkpoints), and the bench's own WAL per run leaves it out. Measure on a
// quiet server all the same: other writers change which pages get images.

// walProbe reads WAL positions and, when pg_walinspect is usable,
// attributes ranges of WAL.
type walProbe struct {
	b       *bencher
	inspect string // the schema of pg_walinspect's functions; "" when unusable
	slot    *pgx.Conn
	rels    map[relFile]walRel
	db      uint32 // the database's OID
	dbSpc   uint32 // its default tablespace
}

// walRel names a relation of the bench schema.
type walRel struct {
	name  string // e.g. "tasks", "tasks_pkey", "tasks (TOAST)"
	table string // the table it belongs to (itself for a table)
	kind  string // "table", "index", "TOAST", "sequence"
}

// relFile is a relation's file as WAL records name it: tablespace,
// database and relfilenode, and the fork.
type relFile struct {
	Spc, DB, Rel uint32
	Fork         string
}

func (r relFile) String() string {
	return fmt.Sprintf("%d/%d/%d fork %s", r.Spc, r.DB, r.Rel, r.Fork)
}

// parseRelFile parses a relation's file as pg_walinspect's block_ref shows
// it after "rel ": "1663/16386/1445378 fork main" (without the fork, the
// main fork).
func parseRelFile(s string) (relFile, error) {
	bad := func() (relFile, error) {
		return relFile{}, fmt.Errorf("relation file %q: want SPC/DB/RELFILENODE [fork NAME]", s)
	}
	path, fork, hasFork := strings.Cut(strings.TrimSpace(s), " fork ")
	r := relFile{Fork: "main"}
	if hasFork {
		if fork == "" || strings.ContainsAny(fork, " /") {
			return bad()
		}
		r.Fork = fork
	}
	parts := strings.Split(path, "/")
	if len(parts) != 3 {
		return bad()
	}
	for i, dst := range []*uint32{&r.Spc, &r.DB, &r.Rel} {
		v, err := strconv.ParseUint(parts[i], 10, 32)
		if err != nil {
			return bad()
		}
		*dst = uint32(v)
	}
	return r, nil
}

// parseLSN parses a WAL position as PostgreSQL prints it: "16/B374D848".
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok || hi == "" || lo == "" || len(hi) > 8 || len(lo) > 8 {
		return 0, fmt.Errorf("WAL position %q: want XXXXXXXX/XXXXXXXX", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("WAL position %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("WAL position %q: %w", s, err)
	}
	return h<<32 | l, nil
}

func formatLSN(v uint64) string { return fmt.Sprintf("%X/%X", v>>32, uint32(v)) }

// walStart prepares the probe: it finds pg_walinspect (creating it in the
// bench's schema when the database has none, so that dropping the schema
// drops it too), names the schema's relations by their files, and holds a
// temporary physical replication slot, so that no checkpoint recycles the
// WAL before it is read. What it cannot do it notes, and the probe reports
// the totals only.
func (b *bencher) walStart(ctx context.Context, rep *Report) *walProbe {
	p := &walProbe{b: b}
	err := b.monitor.QueryRow(ctx, `SELECT oid, dattablespace FROM pg_database WHERE datname = current_database()`).Scan(&p.db, &p.dbSpc)
	if err != nil {
		rep.Note("WAL: reading the database's OID: %v; totals only", err)
		return p
	}
	var schema string
	err = b.monitor.QueryRow(ctx, `SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
WHERE e.extname = 'pg_walinspect'`).Scan(&schema)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := b.monitor.Exec(ctx, "CREATE EXTENSION pg_walinspect SCHEMA "+pgx.Identifier{b.schema}.Sanitize()); err != nil {
			rep.Note("WAL: pg_walinspect is not installed and could not be (%v): totals only, no attribution", err)
			return p
		}
		schema = b.schema
		b.logf("WAL: created extension pg_walinspect in %s", b.schema)
	case err != nil:
		rep.Note("WAL: looking for pg_walinspect: %v; totals only", err)
		return p
	}
	// The functions are the superuser's and pg_read_server_files' by default.
	var usable bool
	err = b.monitor.QueryRow(ctx, `SELECT has_function_privilege($1, 'EXECUTE')`,
		pgx.Identifier{schema, "pg_get_wal_records_info"}.Sanitize()+"(pg_lsn, pg_lsn)").Scan(&usable)
	if err == nil && !usable {
		err = errors.New("no privilege to execute pg_get_wal_records_info")
	}
	if err != nil {
		rep.Note("WAL: pg_walinspect is not usable (%v): totals only, no attribution", err)
		return p
	}
	p.inspect = schema
	if err := p.loadRels(ctx); err != nil {
		rep.Note("WAL: naming the schema's relations: %v; totals only", err)
		p.inspect = ""
		return p
	}
	cfg, err := pgx.ParseConfig(b.url)
	if err == nil {
		if cfg.RuntimeParams == nil {
			cfg.RuntimeParams = map[string]string{}
		}
		cfg.RuntimeParams["application_name"] = b.appName("wal")
		p.slot, err = pgx.ConnectConfig(ctx, cfg)
	}
	if err == nil {
		_, err = p.slot.Exec(ctx, `SELECT pg_create_physical_replication_slot($1, true, true)`, "durable_bench_"+b.tag)
	}
	if err != nil {
		rep.Note("WAL: no temporary replication slot to hold the WAL until it is read (%v): "+
			"a checkpoint during the run may recycle it", err)
		if p.slot != nil {
			p.slot.Close(context.WithoutCancel(ctx))
			p.slot = nil
		}
	}
	return p
}

// close drops the replication slot (a temporary slot goes with its session).
func (p *walProbe) close() {
	if p.slot != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.slot.Close(ctx)
		p.slot = nil
	}
}

// loadRels maps the files of the schema's tables, indexes, sequences and
// TOAST tables (with their indexes) to their names.
func (p *walProbe) loadRels(ctx context.Context) error {
	rows, err := p.b.monitor.Query(ctx, `
WITH parent AS ( -- a partition's table is its partitioned table's (migration 017)
  SELECT c.oid, `+pgstore.CountsAs("c", "pp")+` AS tbl
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_inherits ih ON ih.inhrelid = c.oid LEFT JOIN pg_class pp ON pp.oid = ih.inhparent
  WHERE n.nspname = $1 AND c.relkind = 'r'
), rels AS (
  -- named as the partitioned table's: tasks_default and tasks_p20261129t000000 are tasks, their
  -- tasks_default_pkey and tasks_p20261129t000000_pkey are tasks_pkey
  SELECT c.oid,
         CASE WHEN pc.tbl IS NOT NULL THEN pc.tbl
              WHEN pt.tbl IS NOT NULL AND starts_with(c.relname::text, t.relname::text)
                THEN pt.tbl || substr(c.relname::text, length(t.relname::text) + 1)
              ELSE c.relname::text END AS name,
         coalesce(pt.tbl, pc.tbl, c.relname::text) AS tbl, c.relkind::text AS kind, c.reltablespace
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_index i ON i.indexrelid = c.oid
  LEFT JOIN pg_class t ON t.oid = i.indrelid
  LEFT JOIN parent pt ON pt.oid = i.indrelid
  LEFT JOIN parent pc ON pc.oid = c.oid
  WHERE n.nspname = $1 AND c.relkind IN ('r', 'i', 'S')
  UNION ALL
  SELECT tc.oid, c.relname || ' (TOAST)', p.tbl, 'toast', tc.reltablespace
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_class tc ON tc.oid = c.reltoastrelid
  JOIN parent p ON p.oid = c.oid
  WHERE n.nspname = $1
  UNION ALL
  SELECT ti.indexrelid, c.relname || ' (TOAST index)', p.tbl, 'toast', ic.reltablespace
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_index ti ON ti.indrelid = c.reltoastrelid
  JOIN pg_class ic ON ic.oid = ti.indexrelid JOIN parent p ON p.oid = c.oid
  WHERE n.nspname = $1
)
SELECT name, tbl, kind, reltablespace, pg_relation_filenode(oid) FROM rels WHERE pg_relation_filenode(oid) IS NOT NULL`, p.b.schema)
	if err != nil {
		return err
	}
	p.rels = map[relFile]walRel{}
	for rows.Next() {
		var rel walRel
		var spc, node uint32
		if err := rows.Scan(&rel.name, &rel.table, &rel.kind, &spc, &node); err != nil {
			rows.Close()
			return err
		}
		if spc == 0 {
			spc = p.dbSpc
		}
		rel.kind = map[string]string{"r": "table", "i": "index", "S": "sequence", "toast": "TOAST"}[rel.kind]
		p.rels[relFile{Spc: spc, DB: p.db, Rel: node, Fork: "main"}] = rel
	}
	return rows.Err()
}

// mark reads the WAL insert position.
func (p *walProbe) mark(ctx context.Context) (uint64, error) {
	var s string
	if err := p.b.monitor.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&s); err != nil {
		return 0, fmt.Errorf("reading the WAL position: %w", err)
	}
	return parseLSN(s)
}

// walGroup is WAL summed over records of one transaction class, relation
// and record type.
type walGroup struct {
	class, rel, rmgr, rtype string
	records, bytes, fpi     int64
	multi                   int64 // records naming more than one relation
}

// walClassSQL classes each transaction of a range of WAL by what it writes,
// given the files of runs ($3), ready ($4), run_counts ($5) and tasks ($6):
// create inserts runs; claim deletes ready rows (the claim statement does
// all of its writes); settle updates runs or run_counts (a finish that
// settles runs); finish updates tasks otherwise, or inserts them without
// runs (a function's checkpoints insert its records, and need not update
// any task); other is the rest of the
// transactions writing the schema's relations ($7: the workers' and
// leader's records); none is WAL outside any transaction on those
// relations (pruning, hint bits' full-page images). The rest is foreign:
// other sessions' transactions, and records outside transactions on other
// relations or on none (checkpoints, running xacts).
const walClassSQL = `
WITH w AS (
  SELECT xid::text::bigint AS xid, resource_manager AS rmgr, record_type AS rtype,
         substring(block_ref FROM '^blkref #0: rel ([0-9]+/[0-9]+/[0-9]+ fork [a-z_]+)') AS rel,
         record_length - fpi_length AS len, fpi_length AS fpi,
         CASE WHEN block_ref LIKE '%%blkref #1:%%'
              AND (SELECT count(DISTINCT m[1]) FROM regexp_matches(block_ref, 'rel ([0-9]+/[0-9]+/[0-9]+ fork [a-z_]+)', 'g') AS m) > 1
              THEN 1 ELSE 0 END AS multi
  FROM %s($1::pg_lsn, $2::pg_lsn)
), g AS (
  SELECT xid, rmgr, rtype, rel, count(*) AS n, sum(len) AS len, sum(fpi) AS fpi, sum(multi) AS multi
  FROM w GROUP BY xid, rmgr, rtype, rel
), x AS (
  SELECT xid, CASE
    WHEN xid = 0 THEN 'none'
    WHEN bool_or(rel = ANY($3::text[]) AND rmgr IN ('Heap', 'Heap2') AND rtype ~ '^(MULTI_)?INSERT') THEN 'create'
    WHEN bool_or(rel = ANY($4::text[]) AND rmgr = 'Heap' AND rtype = 'DELETE') THEN 'claim'
    WHEN bool_or((rel = ANY($3::text[]) AND rmgr = 'Heap' AND rtype ~ 'UPDATE') OR rel = ANY($5::text[])) THEN 'settle'
    WHEN bool_or(rel = ANY($6::text[]) AND rmgr IN ('Heap', 'Heap2') AND rtype ~ '^(UPDATE|HOT_UPDATE|(MULTI_)?INSERT)') THEN 'finish'
    WHEN bool_or(rel = ANY($8::text[])) THEN 'periods'
    WHEN bool_or(rel = ANY($7::text[])) THEN 'other'
    ELSE 'foreign' END AS class
  FROM g GROUP BY xid
)
SELECT CASE WHEN g.xid <> 0 THEN x.class WHEN g.rel = ANY($7::text[]) THEN 'none' ELSE 'foreign' END,
       coalesce(g.rel, ''), g.rmgr, g.rtype, sum(g.n)::bigint, sum(g.len)::bigint, sum(g.fpi)::bigint, sum(g.multi)::bigint
FROM g JOIN x USING (xid) GROUP BY 1, 2, 3, 4`

// relOf returns the files of the schema's table name: of its partitions,
// for a partitioned table (runs, tasks and events: migration 017).
func (p *walProbe) relOf(table string) []string {
	var out []string
	for f, r := range p.rels {
		if r.name == table && r.kind == "table" {
			out = append(out, f.String())
		}
	}
	return out
}

// walRange is the attribution of a range of WAL.
type walRange struct {
	from, to uint64
	groups   []walGroup
	took     time.Duration
}

// own estimates the bench's part of delta, the bytes of the range: its
// records' share of all the records read, applied to delta (which also
// holds the pages' headers and the records' alignment).
func (wr *walRange) own(delta int64) float64 {
	var own, foreign int64
	for _, g := range wr.groups {
		if g.class == "foreign" {
			foreign += g.bytes + g.fpi
		} else {
			own += g.bytes + g.fpi
		}
	}
	if own+foreign == 0 {
		return float64(delta)
	}
	return float64(delta) * float64(own) / float64(own+foreign)
}

// attribute reads the records from..to back (once the server has flushed
// them) and sums them.
func (p *walProbe) attribute(ctx context.Context, from, to uint64) (*walRange, error) {
	wr := &walRange{from: from, to: to}
	if p.inspect == "" || to <= from {
		return wr, nil
	}
	start := time.Now()
	for {
		var s string
		if err := p.b.monitor.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn()::text`).Scan(&s); err != nil {
			return nil, err
		}
		if flushed, err := parseLSN(s); err != nil {
			return nil, err
		} else if flushed >= to {
			break
		}
		if time.Since(start) > 10*time.Second {
			return nil, fmt.Errorf("WAL up to %s not flushed after 10s", formatLSN(to))
		}
		time.Sleep(50 * time.Millisecond)
	}
	q := fmt.Sprintf(walClassSQL, pgx.Identifier{p.inspect, "pg_get_wal_records_info"}.Sanitize())
	mine := make([]string, 0, len(p.rels)*3)
	for f := range p.rels {
		for _, fork := range []string{"main", "fsm", "vm"} {
			f.Fork = fork
			mine = append(mine, f.String())
		}
	}
	rows, err := p.b.monitor.Query(ctx, q, formatLSN(from), formatLSN(to),
		p.relOf("runs"), p.relOf("ready"), p.relOf("run_counts"), p.relOf("tasks"), mine, p.relOf("history_partitions"))
	if err != nil {
		return nil, fmt.Errorf("reading the WAL back: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var g walGroup
		if err := rows.Scan(&g.class, &g.rel, &g.rmgr, &g.rtype, &g.records, &g.bytes, &g.fpi, &g.multi); err != nil {
			return nil, fmt.Errorf("reading the WAL back: %w", err)
		}
		wr.groups = append(wr.groups, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the WAL back: %w", err)
	}
	wr.took = time.Since(start)
	return wr, nil
}

// walOperation attributes the records of a type (rmgr and type) that a
// class of transaction wrote on a table to an operation: the events and
// run_counts tables are the events' and the counts' wherever they are
// written; the runs table and its indexes in a finish are the settlement,
// except for the row locks (lockRuns, which every finish takes, settling
// or not; and the lock heap_update logs before it moves a row version to
// another page); the rest of a finish (tasks, the successors' ready rows,
// lanes, the commit records) is the finish's.
func walOperation(class, table, rtype string) string {
	switch table {
	case "events":
		return "events"
	case "run_counts":
		return "counts"
	}
	switch class {
	case "create", "claim":
		return class
	case "settle", "finish":
		if table == "runs" && rtype != "Heap LOCK" {
			return "settle"
		}
		return "finish"
	case "none":
		return "outside transactions"
	case "foreign":
		return "others (other sessions, checkpoints)"
	case "periods":
		return "periods (the leader making and dropping the history's partitions)"
	}
	return "other"
}

// walWriters says which operations write each table, from pgstore/sql.
var walWriters = map[string]string{
	"runs":         "create (insertRuns); settle (updateRuns)",
	"tasks":        "create (insertTasks); claim (claim: state RUNNING); finish (updateTasks)",
	"ready":        "create, finish enqueuing successors (insertReady); claim (FOR UPDATE, DELETE)",
	"run_counts":   "counts: a finish settling runs (countSettled)",
	"events":       "events (insertEvents): those not kept in task rows",
	"frontier":     "claim (its upsert of the claimer's row)",
	"lanes":        "create, enqueue (ensureLanes, updateLanes)",
	"tenants":      "create (ensureTenants)",
	"shapes":       "create (insertShapes)",
	"event_blocks": "claim, transitions (nextval: a record every 32 values)",
	"workers":      "workers' records (every 10 s)",
	"leader":       "the leader's lease",
}

// name names the relation of a group.
func (p *walProbe) name(rel string, other map[relFile]string) (name, table, kind string) {
	if rel == "" {
		return "(no relation)", "", ""
	}
	f, err := parseRelFile(rel)
	if err != nil {
		return "(unparsed " + rel + ")", "", ""
	}
	if r, ok := p.rels[relFile{Spc: f.Spc, DB: f.DB, Rel: f.Rel, Fork: "main"}]; ok {
		name, table, kind = r.name, r.table, r.kind
		if f.Fork != "main" {
			name += " (" + f.Fork + ")"
		}
		return name, table, kind
	}
	if f.DB != p.db {
		return "(other databases)", "", ""
	}
	if n, ok := other[f]; ok {
		return n, "", ""
	}
	return "(other relations of this database)", "", ""
}

// otherNames names the relations of this database outside the schema that
// a range wrote (the catalog's, say), by pg_filenode_relation.
func (p *walProbe) otherNames(ctx context.Context, wr *walRange) map[relFile]string {
	names := map[relFile]string{}
	for _, g := range wr.groups {
		f, err := parseRelFile(g.rel)
		if err != nil || f.DB != p.db {
			continue
		}
		if _, ok := p.rels[relFile{Spc: f.Spc, DB: f.DB, Rel: f.Rel, Fork: "main"}]; ok {
			continue
		}
		if _, ok := names[f]; ok {
			continue
		}
		spc := f.Spc
		if spc == p.dbSpc {
			spc = 0
		}
		var n *string
		if err := p.b.monitor.QueryRow(ctx, `SELECT pg_filenode_relation($1, $2)::text`, spc, f.Rel).Scan(&n); err != nil || n == nil {
			names[f] = "(other relations of this database)"
			continue
		}
		names[f] = "(other) " + *n
	}
	return names
}

// walSum is bytes summed under a key.
type walSum struct {
	key                 []string
	records, bytes, fpi int64
}

func (s *walSum) total() int64 { return s.bytes + s.fpi }

func (s *walSum) add(o *walSum) {
	s.records += o.records
	s.bytes += o.bytes
	s.fpi += o.fpi
}

// walWrittenBy says what writes a relation of the bench schema.
func walWrittenBy(name, kind, table string) string {
	switch {
	case name == "(no relation)":
		return "commit records, and others without a block"
	case kind == "index":
		return "index of " + table + ": an entry per row version (inserts, updates not HOT)"
	case kind == "TOAST":
		return "out-of-line values of " + table
	}
	return walWriters[name]
}

// sumBy sums a range's groups under keys.
func sumBy(groups []walGroup, key func(g walGroup) []string) []*walSum {
	by := map[string]*walSum{}
	for _, g := range groups {
		k := key(g)
		id := strings.Join(k, "\x00")
		s := by[id]
		if s == nil {
			s = &walSum{key: k}
			by[id] = s
		}
		s.records += g.records
		s.bytes += g.bytes
		s.fpi += g.fpi
	}
	sums := slices.Collect(maps.Values(by))
	slices.SortFunc(sums, func(a, b *walSum) int {
		return cmp.Or(cmp.Compare(b.total(), a.total()), slices.Compare(a.key, b.key))
	})
	return sums
}

// walPhase is what the report shows of one phase.
type walPhase struct {
	title string // "insert phase", "work phase"
	per   float64
	unit  string // "run", "task"
	delta int64  // bytes between the two positions
	wr    *walRange
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// tables renders a phase's attribution: by operation (work phase), by
// relation, by record type, and the detail (operation, relation, record
// type) down to minShare of the phase's bytes.
func (p *walProbe) tables(ctx context.Context, rep *Report, ph walPhase, byOp bool, detail bool) []Table {
	if ph.wr == nil || len(ph.wr.groups) == 0 || ph.per <= 0 || ph.delta <= 0 {
		return nil
	}
	other := p.otherNames(ctx, ph.wr)
	per := func(v int64) float64 { return float64(v) / ph.per }
	share := func(v int64) float64 { return round1(100 * float64(v) / float64(ph.delta)) }
	var recLen int64
	for _, g := range ph.wr.groups {
		recLen += g.bytes + g.fpi
	}
	pad := ph.delta - recLen // page headers, alignment, and records across the range's ends
	u := "/" + ph.unit
	cols := []string{"records" + u, "record B" + u, "FPI B" + u, "total B" + u, "share %"}
	row := func(lead []any, s *walSum) []any {
		return append(lead, round2(per(s.records)), round1(per(s.bytes)), round1(per(s.fpi)), round1(per(s.total())), share(s.total()))
	}
	totalRow := func(lead []any) []any {
		return append(lead, "", "", "", round1(per(ph.delta)), 100.0)
	}
	padRow := func(lead []any) []any {
		return append(lead, "", round1(per(pad)), "", round1(per(pad)), share(pad))
	}
	var out []Table

	if byOp {
		t := Table{Title: fmt.Sprintf("WAL BY OPERATION, %s (transactions classed by what they write)", ph.title),
			Columns: append([]string{"operation"}, cols...)}
		for _, s := range sumBy(ph.wr.groups, func(g walGroup) []string {
			_, table, _ := p.name(g.rel, other)
			return []string{walOperation(g.class, table, g.rmgr+" "+g.rtype)}
		}) {
			t.Rows = append(t.Rows, row([]any{s.key[0]}, s))
		}
		t.Rows = append(t.Rows, padRow([]any{"(page headers, alignment)"}), totalRow([]any{"total"}))
		out = append(out, t)
	}

	const minRelShare = 0.1
	t := Table{Title: fmt.Sprintf("WAL BY RELATION, %s (rows of at least %.1f%%)", ph.title, minRelShare),
		Columns: append([]string{"relation", "kind", "written by"}, cols...)}
	var rest walSum
	for _, s := range sumBy(ph.wr.groups, func(g walGroup) []string {
		name, table, kind := p.name(g.rel, other)
		return []string{name, kind, table}
	}) {
		if share(s.total()) < minRelShare {
			rest.add(s)
			continue
		}
		t.Rows = append(t.Rows, row([]any{s.key[0], s.key[1], walWrittenBy(s.key[0], s.key[1], s.key[2])}, s))
	}
	t.Rows = append(t.Rows, row([]any{"(the rest)", "", ""}, &rest),
		padRow([]any{"(page headers, alignment)", "", ""}), totalRow([]any{"total", "", ""}))
	out = append(out, t)

	t = Table{Title: fmt.Sprintf("WAL BY RECORD TYPE, %s", ph.title),
		Columns: append([]string{"record type"}, cols...)}
	for _, s := range sumBy(ph.wr.groups, func(g walGroup) []string { return []string{g.rmgr + " " + g.rtype} }) {
		t.Rows = append(t.Rows, row([]any{s.key[0]}, s))
	}
	t.Rows = append(t.Rows, padRow([]any{"(page headers, alignment)"}), totalRow([]any{"total"}))
	out = append(out, t)

	if detail {
		const minShare = 0.5
		t = Table{Title: fmt.Sprintf("WAL BY OPERATION, RELATION AND RECORD TYPE, %s (rows of at least %.1f%%)", ph.title, minShare),
			Columns: append([]string{"operation", "relation", "record type"}, cols...)}
		rest = walSum{}
		for _, s := range sumBy(ph.wr.groups, func(g walGroup) []string {
			name, table, _ := p.name(g.rel, other)
			return []string{walOperation(g.class, table, g.rmgr+" "+g.rtype), name, g.rmgr + " " + g.rtype}
		}) {
			if share(s.total()) < minShare {
				rest.add(s)
				continue
			}
			t.Rows = append(t.Rows, row([]any{s.key[0], s.key[1], s.key[2]}, s))
		}
		t.Rows = append(t.Rows, row([]any{"(the rest)", "", ""}, &rest),
			padRow([]any{"(page headers, alignment)", "", ""}), totalRow([]any{"total", "", ""}))
		out = append(out, t)
	}
	var multi int64
	for _, g := range ph.wr.groups {
		multi += g.multi
	}
	if multi > 0 {
		rep.Note("WAL, %s: %d records name more than one relation; each is counted for its first",
			ph.title, multi)
	}
	return out
}

// walRun is the WAL of a single, dag or func run: the positions before the
// inserts, after them, after the checkpoint that follows them and once
// every run settled, and the insert phase's attribution, read before the
// checkpoint.
type walRun struct {
	p      *walProbe
	marks  [4]uint64
	insert *walRange
	// ckpts counts the server's checkpoints at the start and the end of
	// the work phase (-1: unknown): one in between images every page
	// touched again.
	ckpts [2]int64
}

// checkpoints returns how many checkpoints the server has started
// (pg_stat_bgwriter, PostgreSQL 16 and older), or -1.
func (p *walProbe) checkpoints(ctx context.Context) int64 {
	var n int64
	if err := p.b.monitor.QueryRow(ctx, `SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter`).Scan(&n); err != nil {
		return -1
	}
	return n
}

// workStarts and workEnds mark the work phase.
func (wr *walRun) workStarts(ctx context.Context) (err error) {
	wr.ckpts[0] = wr.p.checkpoints(ctx)
	wr.marks[2], err = wr.p.mark(ctx)
	return err
}

func (wr *walRun) workEnds(ctx context.Context) (err error) {
	wr.marks[3], err = wr.p.mark(ctx)
	wr.ckpts[1] = wr.p.checkpoints(ctx)
	return err
}

// insertsDone marks the end of the inserts and reads their WAL back. Only
// a failure to read the WAL position fails it: one to read the WAL back is
// noted, and the report has the totals.
func (wr *walRun) insertsDone(ctx context.Context, rep *Report) error {
	var err error
	if wr.marks[1], err = wr.p.mark(ctx); err != nil {
		return err
	}
	if wr.p.inspect != "" {
		wr.p.b.logf("WAL: the inserts wrote %s bytes; reading them back", FormatNumber(float64(wr.marks[1]-wr.marks[0]), 0))
	}
	if wr.insert, err = wr.p.attribute(ctx, wr.marks[0], wr.marks[1]); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rep.Note("WAL, insert phase: %v", err)
	}
	return nil
}

// report reads the work phase's WAL back and adds the figures and tables.
func (wr *walRun) report(ctx context.Context, rep *Report, n int, win window, wl workload) error {
	m := wr.marks
	if wr.p.inspect != "" {
		wr.p.b.logf("WAL: the work wrote %s bytes; reading them back", FormatNumber(float64(m[3]-m[2]), 0))
	}
	work, err := wr.p.attribute(ctx, m[2], m[3])
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rep.Note("WAL, work phase: %v", err)
	}
	insertB, ckptB, workB, totalB := float64(m[1]-m[0]), float64(m[2]-m[1]), float64(m[3]-m[2]), float64(m[3]-m[0])
	perRunDone := float64(win.runsDone)
	div := func(a, b float64) float64 {
		if b <= 0 {
			return 0
		}
		return a / b
	}
	rep.Add("wal_insert_b_per_run", "WAL, insert phase, per run inserted", div(insertB, float64(n)), "B/run", 0)
	rep.Add("wal_checkpoint_b", "WAL between the inserts and the work (the checkpoint)", ckptB, "B", 0)
	rep.Add("wal_work_b_per_run", "WAL, work phase (checkpoint → last run settled), per run completed", div(workB, perRunDone), "B/run", 0)
	switch wl.unit {
	case "task":
		rep.Add("wal_total_b_per_run", "WAL in all, first insert → last run settled, per run", div(totalB, float64(n)), "B/run", 0)
		tasks := float64(n * wl.perRun)
		rep.Add("wal_insert_b_per_task", "WAL, insert phase, per task inserted", div(insertB, tasks), "B/task", 0)
		rep.Add("wal_work_b_per_task", "WAL, work phase, per task completed", div(workB, float64(win.tasksDone)), "B/task", 0)
		rep.AddGoal("wal_total_b_per_task", "WAL in all, per task", div(totalB, tasks), "B/task", 0, AtMost(1200))
	case "step":
		// The inserts write the runs and their bodies; the steps' records
		// are written as the functions run, in the work phase.
		rep.Add("wal_total_b_per_run", "WAL in all, first insert → last run settled, per run", div(totalB, float64(n)), "B/run", 0)
		steps := float64(n * wl.perRun)
		rep.Add("wal_insert_b_per_step", "WAL, insert phase, per step to come", div(insertB, steps), "B/step", 0)
		rep.Add("wal_work_b_per_step", "WAL, work phase, per step recorded", div(workB, float64(win.stepsDone)), "B/step", 0)
		rep.Add("wal_total_b_per_step", "WAL in all, per step", div(totalB, steps), "B/step", 0)
	default:
		rep.AddGoal("wal_total_b_per_run", "WAL in all, first insert → last run settled, per run", div(totalB, float64(n)), "B/run", 0, AtMost(1500))
	}
	rep.Note("WAL positions: %s before the inserts, %s after them, %s after the checkpoint, %s once every run settled",
		formatLSN(m[0]), formatLSN(m[1]), formatLSN(m[2]), formatLSN(m[3]))
	if c := wr.ckpts; c[0] >= 0 && c[1] > c[0] {
		rep.Note("WAL: the server started %d checkpoint(s) during the work phase: pages touched again after one were imaged again, "+
			"which inflates its full-page images", c[1]-c[0])
	}
	if wr.p.inspect == "" || work == nil {
		return nil
	}
	var fpi int64
	for _, g := range work.groups {
		if g.class != "foreign" {
			fpi += g.fpi
		}
	}
	unit, insPer, workPer := wl.unit, float64(n*wl.perRun), float64(wl.done(win))
	rep.Add("wal_work_fpi_b_per_"+unit, "WAL, work phase: full-page images of the bench's records", div(float64(fpi), workPer), "B/"+unit, 0)
	// Without other sessions' records: the bench's own WAL.
	workOwn := work.own(int64(m[3] - m[2]))
	rep.Add("wal_work_own_b_per_"+unit, "WAL, work phase, the bench's records only (other sessions' left out)", div(workOwn, workPer), "B/"+unit, 0)
	if wr.insert != nil {
		insOwn := wr.insert.own(int64(m[1] - m[0]))
		rep.Add("wal_insert_own_b_per_"+unit, "WAL, insert phase, the bench's records only", div(insOwn, insPer), "B/"+unit, 0)
		rep.Add("wal_total_own_b_per_"+unit, "WAL in all, the bench's records only (both phases)", div(insOwn, insPer)+div(workOwn, workPer), "B/"+unit, 0)
	}
	if foreign := float64(m[3]-m[2]) - workOwn; foreign > 0 {
		rep.Note("WAL: other sessions wrote about %s bytes during the work phase (%.1f%% of it)",
			FormatNumber(foreign, 0), 100*foreign/float64(m[3]-m[2]))
	}
	rep.Tables = append(rep.Tables, wr.p.tables(ctx, rep, walPhase{title: "work phase", per: workPer, unit: unit, delta: int64(m[3] - m[2]), wr: work}, true, true)...)
	if wr.insert != nil {
		rep.Tables = append(rep.Tables, wr.p.tables(ctx, rep, walPhase{title: "insert phase", per: insPer, unit: unit, delta: int64(m[1] - m[0]), wr: wr.insert}, false, false)...)
		rep.Note("WAL read back with pg_walinspect in %.1fs (inserts) and %.1fs (work)", wr.insert.took.Seconds(), work.took.Seconds())
	}
	return nil
}
