package bench

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRelFile(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]relFile{
		"1663/16386/1445378 fork main":   {Spc: 1663, DB: 16386, Rel: 1445378, Fork: "main"},
		"1663/16386/1445378 fork vm":     {Spc: 1663, DB: 16386, Rel: 1445378, Fork: "vm"},
		"1664/0/1262 fork fsm":           {Spc: 1664, DB: 0, Rel: 1262, Fork: "fsm"},
		"1663/5/4294967295":              {Spc: 1663, DB: 5, Rel: 4294967295, Fork: "main"},
		" 1663/16386/2608 fork main ":    {Spc: 1663, DB: 16386, Rel: 2608, Fork: "main"},
		"1663/16386/16390 fork init_abc": {Spc: 1663, DB: 16386, Rel: 16390, Fork: "init_abc"},
	} {
		got, err := parseRelFile(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "1663/16386", "1663/16386/x fork main", "1663/16386/1/2", "1663/16386/4294967296",
		"1663/16386/1445378 fork ", "a/b/c", "-1/2/3", "1663/16386/1445378 fork main blk 0"} {
		_, err := parseRelFile(in)
		require.Error(t, err, in)
	}
	// What walClassSQL extracts from a block reference parses, and prints
	// back the same.
	f := relFile{Spc: 1663, DB: 16386, Rel: 1446589, Fork: "main"}
	got, err := parseRelFile(f.String())
	require.NoError(t, err)
	require.Equal(t, f, got)
	require.Equal(t, "1663/16386/1446589 fork main", f.String())
}

func TestParseLSN(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]uint64{
		"0/0":               0,
		"3/98B2D2F8":        3<<32 | 0x98B2D2F8,
		"16/b374d848":       0x16<<32 | 0xB374D848,
		"FFFFFFFF/FFFFFFFF": 1<<64 - 1,
	} {
		got, err := parseLSN(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	require.Equal(t, "3/98B2D2F8", formatLSN(3<<32|0x98B2D2F8))
	require.Equal(t, "0/0", formatLSN(0))
	for _, in := range []string{"", "3", "3/", "/3", "G/0", "3/98B2D2F8/1", "100000000/0", "0/100000000"} {
		_, err := parseLSN(in)
		require.Error(t, err, in)
	}
}

func TestWALOperation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ class, table, rtype, want string }{
		{"create", "runs", "Heap INSERT", "create"},
		{"create", "runs", "Heap LOCK", "create"},
		{"create", "ready", "Btree INSERT_LEAF", "create"},
		{"claim", "tasks", "Heap UPDATE", "claim"},
		{"claim", "", "Transaction COMMIT", "claim"},
		{"settle", "runs", "Heap HOT_UPDATE", "settle"},
		{"settle", "runs", "Btree INSERT_LEAF", "settle"},
		{"settle", "runs", "Heap LOCK", "finish"},
		{"finish", "runs", "Heap LOCK", "finish"},
		{"settle", "tasks", "Heap UPDATE", "finish"},
		{"settle", "run_counts", "Heap HOT_UPDATE", "counts"},
		{"finish", "ready", "Heap INSERT", "finish"},
		{"finish", "events", "Heap INSERT", "events"},
		{"none", "", "Standby RUNNING_XACTS", "outside transactions"},
		{"other", "workers", "Heap UPDATE", "other"},
		{"foreign", "", "Heap INSERT", "others (other sessions, checkpoints)"},
	} {
		require.Equal(t, c.want, walOperation(c.class, c.table, c.rtype), "%s on %s", c.class, c.table)
	}
}

// TestWALTables renders a phase from groups as walClassSQL returns them,
// without a database: every relation is the schema's or another
// database's.
func TestWALTables(t *testing.T) {
	t.Parallel()
	tasks := relFile{Spc: 1663, DB: 5, Rel: 100, Fork: "main"}
	pkey := relFile{Spc: 1663, DB: 5, Rel: 101, Fork: "main"}
	runs := relFile{Spc: 1663, DB: 5, Rel: 102, Fork: "main"}
	p := &walProbe{db: 5, dbSpc: 1663, rels: map[relFile]walRel{
		tasks: {name: "tasks", table: "tasks", kind: "table"},
		pkey:  {name: "tasks_pkey", table: "tasks", kind: "index"},
		runs:  {name: "runs", table: "runs", kind: "table"},
	}}
	wr := &walRange{groups: []walGroup{
		{class: "claim", rel: tasks.String(), rmgr: "Heap", rtype: "UPDATE", records: 100, bytes: 20_000, fpi: 10_000},
		{class: "claim", rel: pkey.String(), rmgr: "Btree", rtype: "INSERT_LEAF", records: 100, bytes: 8_000},
		{class: "claim", rel: "", rmgr: "Transaction", rtype: "COMMIT", records: 2, bytes: 100},
		{class: "settle", rel: tasks.String(), rmgr: "Heap", rtype: "UPDATE", records: 100, bytes: 21_000},
		{class: "settle", rel: runs.String(), rmgr: "Heap", rtype: "HOT_UPDATE", records: 100, bytes: 10_000, multi: 3},
		{class: "foreign", rel: "1663/9/7 fork main", rmgr: "Heap", rtype: "INSERT", records: 1, bytes: 50},
		{class: "none", rel: runs.String(), rmgr: "Heap2", rtype: "PRUNE", records: 1, bytes: 30},
	}}
	rep := &Report{}
	tables := p.tables(context.Background(), rep, walPhase{title: "work phase", per: 100, unit: "run", delta: 70_000, wr: wr}, true, true)
	require.Len(t, tables, 4)
	ops := tables[0]
	require.Contains(t, ops.Title, "WAL BY OPERATION, work phase")
	// claim: 20,000 + 10,000 + 8,000 + 100 bytes over 100 runs.
	require.Equal(t, []any{"claim", 2.02, 281.0, 100.0, 381.0, 54.4}, ops.Rows[0])
	require.Equal(t, []any{"finish", 1.0, 210.0, 0.0, 210.0, 30.0}, ops.Rows[1])
	require.Equal(t, []any{"settle", 1.0, 100.0, 0.0, 100.0, 14.3}, ops.Rows[2])
	// Page headers: 70,000 bytes less the 69,180 of the records.
	require.Equal(t, []any{"(page headers, alignment)", "", 8.2, "", 8.2, 1.2}, ops.Rows[len(ops.Rows)-2])
	require.Equal(t, []any{"total", "", "", "", 700.0, 100.0}, ops.Rows[len(ops.Rows)-1])

	rels := tables[1]
	require.Equal(t, []any{"tasks", "table", walWriters["tasks"], 2.0, 410.0, 100.0, 510.0, 72.9}, rels.Rows[0])
	require.Equal(t, "index of tasks: an entry per row version (inserts, updates not HOT)", rels.Rows[2][2])
	var names []any
	for _, r := range rels.Rows {
		names = append(names, r[0])
	}
	require.Equal(t, []any{"tasks", "runs", "tasks_pkey", "(no relation)", "(other databases)", "(the rest)",
		"(page headers, alignment)", "total"}, names)

	types := tables[2]
	require.Equal(t, []any{"Heap UPDATE", 2.0, 410.0, 100.0, 510.0, 72.9}, types.Rows[0])

	detail := tables[3]
	require.Equal(t, []any{"claim", "tasks", "Heap UPDATE", 1.0, 200.0, 100.0, 300.0, 42.9}, detail.Rows[0])
	// Rows under half a percent go to the rest: the commit, the other
	// database's insert, the pruning (180 bytes).
	require.Equal(t, []any{"(the rest)", "", "", 0.04, 1.8, 0.0, 1.8, 0.3}, detail.Rows[len(detail.Rows)-3])
	require.Len(t, rep.Notes, 1)
	require.Contains(t, rep.Notes[0], "3 records name more than one relation")

	// The bench's own share of the 70,000 bytes: 69,130 of the 69,180
	// bytes of records.
	require.InDelta(t, 70_000*69_130/69_180.0, wr.own(70_000), 1e-9)
	require.Equal(t, 70_000.0, (&walRange{}).own(70_000))

	// The tables render.
	rep.Tables = tables
	var buf bytes.Buffer
	require.NoError(t, rep.WriteText(&buf))
	require.Contains(t, buf.String(), "RECORD B/RUN")

	// Without records or runs, no tables.
	require.Empty(t, p.tables(context.Background(), rep, walPhase{title: "x", per: 0, delta: 1, wr: wr}, true, true))
	require.Empty(t, p.tables(context.Background(), rep, walPhase{title: "x", per: 1, delta: 1, wr: &walRange{}}, true, true))
}
