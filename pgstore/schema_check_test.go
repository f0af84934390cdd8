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
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	var defs []string
	rows, err := pool.Query(ctx, `SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
		JOIN pg_class t ON t.oid = c.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace
		WHERE n.nspname = $1 AND t.relname = 'runs' AND c.contype = 'c' AND c.conname = 'runs_status_check'`, schema)
	require.NoError(t, err)
	for rows.Next() {
		var def string
		require.NoError(t, rows.Scan(&def))
		defs = append(defs, def)
	}
	require.NoError(t, rows.Err())
	require.Len(t, defs, 1, "the runs' status check: %v", defs)
	var allowed []string
	for _, m := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(defs[0], -1) {
		allowed = append(allowed, m[1])
	}
	var want []string
	for _, s := range durabletype.RunStatuses {
		want = append(want, string(s))
	}
	slices.Sort(allowed)
	slices.Sort(want)
	require.Equal(t, want, allowed, "the runs' status check (%s) must allow exactly durabletype.RunStatuses: "+
		"add a migration that widens (or narrows) it", defs[0])
}
