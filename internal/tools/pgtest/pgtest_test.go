package pgtest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.ClosePool()
	if os.Getenv("PGTEST_CHILD") != "1" { // TestWithoutURL's children stay quiet
		pgtest.NoteSkipped()
	}
	os.Exit(code)
}

// TestWithoutURL runs a child test without the URL: it skips, except with
// CI=true, where it fails. Children run with PGTEST_CHILD set.
func TestWithoutURL(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") != "" {
		pgtest.URL(t)
		return
	}
	t.Parallel()
	for _, tc := range []struct {
		ci     string
		fails  bool
		output string
	}{
		{ci: "", fails: false, output: "--- SKIP"},
		{ci: "false", fails: false, output: "--- SKIP"},
		{ci: "true", fails: true, output: "--- FAIL"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWithoutURL$", "-test.v")
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, pgtest.EnvURL+"=") && !strings.HasPrefix(kv, "CI=") {
				env = append(env, kv)
			}
		}
		env = append(env, "PGTEST_CHILD=1")
		if tc.ci != "" {
			env = append(env, "CI="+tc.ci)
		}
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.Equal(t, tc.fails, err != nil, "CI=%q: %v\n%s", tc.ci, err, out)
		require.Contains(t, string(out), tc.output)
		require.Contains(t, string(out), pgtest.EnvURL, "the message says how to run the tests")
	}
}

func TestSchema(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	var schema string
	t.Run("inner", func(t *testing.T) {
		schema = pgtest.Schema(t, pool)
		var ok bool
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`,
			pgx.Identifier{schema, "tasks"}.Sanitize()).Scan(&ok))
		require.True(t, ok, "the schema is migrated")
		require.NotNil(t, pgtest.Store(t))
	})
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n))
	require.Zero(t, n, "the schema is dropped when the test ends")
}
