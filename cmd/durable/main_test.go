package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durablecli"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.ClosePool()
	pgtest.NoteSkipped()
	os.Exit(code)
}

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := durablecli.Run(context.Background(), config(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestDemo(t *testing.T) {
	t.Parallel()
	// An empty --database-url overrides $DURABLE_DATABASE_URL: the
	// in-memory store, whatever the environment of the test.
	code, out, errOut := runCLI(t, "demo", "--fraud-window", "50ms", "--database-url=")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	for _, want := range []string{
		`workflow "order-processing" on the in-memory store, fraud window 50ms`,
		"A-1001  charge            RETRYING   in 200ms after: payment gateway timeout",
		"A-1001  fraud-window      SLEEPING",
		"A-1001  fraud-window      WOKEN",
		`B-2002  charge            SKIPPED    skip condition on "validate" fired`,
		"B-2002  ship              SKIPPED    all parents skipped",
		"order A-1001: COMPLETED",
		`finalize          COMPLETED              "done: shipped by ACME, tracking TRK-A-1001"`,
		`finalize          COMPLETED              "done: order B-2002 rejected: amount must be positive"`,
		"demo: both orders ended as expected",
	} {
		require.Contains(t, out, want)
	}
	require.Empty(t, errOut)
}

// TestDemoOnPostgreSQL runs the demo against a fresh schema (which it
// migrates) and expects the same outcome as in memory.
func TestDemoOnPostgreSQL(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	schema := pgtest.NewSchemaName()
	t.Cleanup(func() {
		pool := pgtest.Pool(t)
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		require.NoError(t, err)
	})
	code, out, errOut := runCLI(t, "demo", "--fraud-window", "200ms", "--database-url", url, "--schema", schema)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Contains(t, out, "on PostgreSQL (schema "+schema+")")
	require.Contains(t, out, "A-1001  fraud-window      WOKEN")
	require.Contains(t, out, "demo: both orders ended as expected")
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	code, _, errOut := runCLI(t)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "Usage:")

	code, _, errOut = runCLI(t, "frobnicate")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unknown command "frobnicate"`)

	code, _, errOut = runCLI(t, "demo", "--no-such-flag")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "Usage: durable demo")

	code, _, errOut = runCLI(t, "demo", "--fraud-window", "soon")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "invalid value")

	code, _, errOut = runCLI(t, "demo", "--fraud-window", "-1s")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "must be positive")

	code, _, errOut = runCLI(t, "demo", "extra")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unexpected argument "extra"`)

	code, out, _ := runCLI(t, "help")
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(out, "durable runs durable DAG workflows"))

	code, _, errOut = runCLI(t, "demo", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "Usage: durable demo")
}
