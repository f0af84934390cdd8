package pgstore_test

import (
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

// TestRunStatusCheckAllowsEveryStatus: the CHECK constraint of the runs'
// status, as the migrations leave it, allows exactly durabletype's run
// statuses: a status added to RunStatuses without its migration (or a
// migration that widens the check for a status the code does not know)
// fails here, not at the first run that enters it.
func TestRunStatusCheckAllowsEveryStatus(t *testing.T) {
	t.Parallel()
	var want []string
	for _, s := range durabletype.RunStatuses {
		want = append(want, string(s))
	}
	checkAllows(t, "runs", "runs_status_check", want)
}

// TestTaskKindCheckAllowsEveryKind: the CHECK constraint of the tasks'
// kind allows exactly durabletype.TaskKinds, so that a new kind of task
// cannot ship without its migration.
func TestTaskKindCheckAllowsEveryKind(t *testing.T) {
	t.Parallel()
	var want []string
	for _, k := range durabletype.TaskKinds {
		want = append(want, string(k))
	}
	checkAllows(t, "tasks", "tasks_kind_check", want)
}

// checkAllows checks that the CHECK constraint name of table allows
// exactly the words want.
func checkAllows(t *testing.T, table, name string, want []string) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	var defs []string
	rows, err := pool.Query(ctx, `SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
		JOIN pg_class t ON t.oid = c.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace
		WHERE n.nspname = $1 AND t.relname = $2 AND c.contype = 'c' AND c.conname = $3`, schema, table, name)
	require.NoError(t, err)
	for rows.Next() {
		var def string
		require.NoError(t, rows.Scan(&def))
		defs = append(defs, def)
	}
	require.NoError(t, rows.Err())
	require.Len(t, defs, 1, "the check %s: %v", name, defs)
	var allowed []string
	for _, m := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(defs[0], -1) {
		allowed = append(allowed, m[1])
	}
	slices.Sort(allowed)
	want = slices.Sorted(slices.Values(want))
	require.Equal(t, want, allowed, "the check %s (%s) must allow exactly durabletype's list: "+
		"add a migration that widens (or narrows) it", name, defs[0])
}
