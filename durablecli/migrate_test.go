package durablecli

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
)

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	schema := pgtest.NewSchemaName()
	t.Cleanup(func() {
		_, err := pgtest.Pool(t).Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		require.NoError(t, err)
	})
	db := []string{"--database-url", url, "--schema", schema}
	code, out, errOut := runCLI(t, append([]string{"migrate", "status"}, db...)...)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `001\s+initial\s+no`, out)

	code, out, errOut = runCLI(t, append([]string{"migrate", "up"}, db...)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "applied migration 001")
	code, out, _ = runCLI(t, append([]string{"migrate", "up"}, db...)...)
	require.Equal(t, 0, code)
	require.Contains(t, out, "nothing to do")
	code, out, _ = runCLI(t, append([]string{"migrate", "status"}, db...)...)
	require.Equal(t, 0, code)
	require.NotContains(t, out, " no\n")

	states, err := pgstore.MigrationStatus(context.Background(), pgtest.Pool(t), schema)
	require.NoError(t, err)
	newest := states[len(states)-1].Version
	code, out, errOut = runCLI(t, append([]string{"migrate", "down"}, db...)...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, fmt.Sprintf("schema %s: reverted migration %03d\n", schema, newest), out, "down reverts the newest")

	code, out, _ = runCLI(t, "migrate", "sql", "--schema", "my_schema")
	require.Equal(t, 0, code)
	require.Contains(t, out, `CREATE TABLE IF NOT EXISTS "my_schema".migrations`)
	require.Contains(t, out, `CREATE TABLE "my_schema".tasks`)

	code, _, errOut = runCLI(t, "migrate", "sideways", "--database-url", url)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unknown action "sideways"`)
	code, _, errOut = runCLI(t, "migrate", "up", "--database-url", "")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "--database-url")
	code, _, errOut = runCLI(t, "migrate", "sql", "--direction", "around")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "around")
}
