package pgstore

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// TestStatementFiles: every file of sql/ parses as "-- name:" blocks, every
// statement is the field of queries of its name and every field has its
// statement, with nothing left of the placeholders and comments; every
// fragment is used by the Go code. No database is needed.
func TestStatementFiles(t *testing.T) {
	blocks, err := loadSQLBlocks(sqlFiles)
	require.NoError(t, err)
	files, err := filepath.Glob("sql/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	perFile := map[string]int{}
	for _, b := range blocks {
		perFile[b.file]++
	}
	for _, f := range files {
		require.NotZero(t, perFile[filepath.Base(f)], "%s holds no statement", f)
	}

	q := newQueries("a schema")
	fields := 0
	for name, sql := range queryFields(&q) {
		fields++
		sql := &sql
		b, ok := blocks[name]
		require.True(t, ok, "queries.%s has no statement", name)
		require.False(t, b.fragment, "queries.%s is a fragment", name)
		require.Equal(t, render("a schema", b.sql), *sql, "queries.%s holds another statement", name)
		require.NotContains(t, *sql, "{{", "%s: a placeholder is left", name)
		require.NotContains(t, *sql, "--", "%s: a comment would be sent to the server", name)
		require.NotContains(t, *sql, ";", "%s", name)
	}
	statements := 0
	for name, b := range blocks {
		if b.fragment {
			src := goSources(t)
			included := false // by a statement: {{name(param=value)}}
			for _, o := range blocks {
				included = included || slices.Contains(o.includes, name)
			}
			if !included {
				require.Contains(t, src, `sqlFragment("`+name+`")`, "%s: fragment %s is not used", b.file, name)
			}
			continue
		}
		statements++
	}
	require.Equal(t, statements, fields, "statements without a field")
	// Every constant is used.
	all := ""
	for _, f := range files {
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		all += string(text)
	}
	for name := range sqlConstants {
		require.Contains(t, all, "{{"+name+"}}", "constant %s is not used", name)
	}
}

// goSources returns the package's Go code, tests left out.
func goSources(t *testing.T) string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var sb strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		sb.Write(text)
	}
	return sb.String()
}

// TestStatementFilesMalformed: the mistakes a file of sql/ may hold fail
// loudly.
func TestStatementFilesMalformed(t *testing.T) {
	for name, text := range map[string]string{
		"sql before a name":  "SELECT 1;\n-- name: a\nSELECT 1;\n",
		"bad header":         "-- name: a b\nSELECT 1;\n",
		"empty":              "-- name: a\n-- nothing\n\n-- name: b\nSELECT 1;\n",
		"no semicolon":       "-- name: a\nSELECT 1\n",
		"two statements":     "-- name: a\nSELECT 1; SELECT 2;\n",
		"fragment with ;":    "-- fragment: a\nSELECT 1;\n",
		"unknown constant":   "-- name: a\nSELECT {{nope}};\n",
		"name used twice":    "-- name: a\nSELECT 1;\n\n-- name: a\nSELECT 2;\n",
		"name in two files":  "-- name: now\nSELECT 1;\n",
		"header inside text": "-- name: a\nSELECT 1\n-- name:\n;\n",
	} {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{
				"sql/a.sql": {Data: []byte(text)},
				"sql/b.sql": {Data: []byte("-- name: now\nSELECT now();\n")},
			}
			_, err := loadSQLBlocks(fsys)
			require.Error(t, err)
		})
	}
	blocks, err := loadSQLBlocks(fstest.MapFS{"sql/a.sql": {Data: []byte(`-- A header.

-- name: a
-- What a does.
SELECT {{countShards}}
  FROM {{schema}}.t;

-- fragment: b
x = {{tenant}}
`)}})
	require.NoError(t, err)
	require.Equal(t, "SELECT 8\n  FROM {{schema}}.t", blocks["a"].sql)
	require.Equal(t, "x = {{tenant}}", blocks["b"].sql)
	require.True(t, blocks["b"].fragment)
}

// TestStatementVariants: statements written out whole in several variants
// (a few more columns, another pick) agree on what they share, so that a
// change to one that misses the others fails here.
func TestStatementVariants(t *testing.T) {
	stmts := sqlBlocks()
	norm := func(s string) string {
		s = strings.Join(strings.Fields(s), " ")
		return strings.NewReplacer("( ", "(", " )", ")").Replace(s)
	}
	sql := func(name string) string {
		b, ok := stmts[name]
		require.True(t, ok, name)
		return norm(b.sql)
	}
	without := func(s string, parts ...string) string {
		for _, p := range parts {
			p = norm(p)
			require.Contains(t, s, p)
			s = strings.ReplaceAll(s, p, "")
		}
		return s
	}
	children := []string{", parent_id, parent_step, parent_result", ", parent_id, nullif(parent_step, ''), nullif(parent_result, '')",
		", $15::uuid[], $16::text[], $17::text[]"}
	traced := []string{", trace_parent", ", nullif(trace_parent, '')"}
	onConflict := " ON CONFLICT DO NOTHING RETURNING id"
	require.Equal(t, sql("insertRuns"), without(sql("insertChildRuns"), children...))
	require.Equal(t, sql("insertRuns"), without(sql("insertRunsTraced"), append(traced, ", $15::text[]")...))
	require.Equal(t, sql("insertRuns"), without(sql("insertChildRunsTraced"), append(append(traced, ", $18::text[]"), children...)...))
	require.Equal(t, sql("insertRuns")+onConflict, sql("insertRunsNew"))
	require.Equal(t, sql("insertRunsTraced")+onConflict, sql("insertRunsNewTraced"))
	require.Equal(t, sql("insertTasks"), without(sql("insertTasksWaits"), ", item, item_input, child_id", ", $22::int[], $23::bytea[], $24::uuid[]"))
	require.Equal(t, sql("updateTasks"), without(sql("updateTasksWaits"),
		`, wait_key = nullif(u.wait_key, ''), child_id = coalesce(u.child_id, t.child_id), items = coalesce(u.items, t.items),
		items_left = coalesce(u.items_left, t.items_left), item_input = coalesce(u.item_input, t.item_input)`,
		", $19::text[], $20::uuid[], $21::int[], $22::int[], $23::bytea[]", ", wait_key, child_id, items, items_left, item_input"))

	// The claims differ in what they pick and the parameter of the
	// workflows.
	picked := regexp.MustCompile(`picked AS \(.*?\), deleted AS`)
	claim := picked.ReplaceAllString(sql("claim"), "deleted AS")
	claimIDs := picked.ReplaceAllString(sql("claimIDs"), "deleted AS")
	require.Equal(t, claim, strings.Replace(claimIDs, "m.block, $5::text[]", "m.block, $1::text[]", 1))

	// The columns of a transition's tasks and items.
	columns := regexp.MustCompile(`^SELECT (.*?) FROM`)
	step := columns.FindStringSubmatch(sql("loadTasks"))[1]
	item := step + ", coalesce(item, 0), item_input"
	require.Equal(t, item, columns.FindStringSubmatch(sql("loadItems"))[1])
	require.Equal(t, item, columns.FindStringSubmatch(sql("loadMapItems"))[1])

	// The columns of scanSchedule.
	schedule := columns.FindStringSubmatch(sql("getSchedule"))[1]
	for _, name := range []string{"listSchedules", "lockSchedule", "dueSchedules", "lockDeclared"} {
		require.Equal(t, schedule, columns.FindStringSubmatch(sql(name))[1], name)
	}
	returning := regexp.MustCompile(` RETURNING (.*)$`)
	for _, name := range []string{"createSchedule", "pauseSchedule"} {
		require.Equal(t, schedule, returning.FindStringSubmatch(sql(name))[1], name)
	}

	// The conditions shared.
	require.Contains(t, sql("statsInflight"), norm(inflightRuns("$1")))
	require.Contains(t, sql("timerCheck"), strings.TrimPrefix(sql("nextTimer"), "SELECT "))
	obsolete := strings.TrimPrefix(sql("pruneFrontier"), "DELETE FROM {{schema}}.frontier r WHERE ")
	require.Contains(t, sql("leaderCheck"), obsolete)
}
