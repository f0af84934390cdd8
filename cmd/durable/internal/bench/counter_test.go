package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestSQLKey(t *testing.T) {
	t.Parallel()
	require.Equal(t, "SELECT a, b FROM t WHERE x = $1", sqlKey("\n  SELECT a,\n\t b  FROM t\n WHERE x = $1\n"))
	require.Equal(t, "", sqlKey(" \n\t"))
	long := sqlKey(strings.Repeat("abc ", 100))
	require.Len(t, long, sqlKeyLen)
	require.False(t, strings.HasSuffix(long, " "))
}

// TestCounterBySQL: statements are counted alone and in batches, a BEGIN
// (pgx's, or one queued at the head of a batch) counts a transaction, and
// BySQL groups the statements by their text.
func TestCounterBySQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &Counter{BySQL: true}
	c.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{SQL: "begin"})
	c.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{SQL: "SELECT 1"})
	c.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{SQL: "SELECT  1\n"})
	c.TraceBatchQuery(ctx, nil, pgx.TraceBatchQueryData{SQL: "BEGIN"})
	c.TraceBatchQuery(ctx, nil, pgx.TraceBatchQueryData{SQL: "UPDATE t SET x = 1"})
	c.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{SQL: "BEGINNING"}) // not a BEGIN
	c.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{SQL: "BEGIN; SELECT set_config('x', 'on', true)"})
	n := c.Counts()
	require.Equal(t, int64(7), n.Statements)
	require.Equal(t, int64(3), n.Transactions)
	require.Equal(t, []StatementCount{{"SELECT 1", 2}, {"BEGIN", 1}, {"BEGIN; SELECT set_config('x', 'on', true)", 1}, {"BEGINNING", 1},
		{"UPDATE t SET x = 1", 1}, {"begin", 1}}, c.Statements())

	plain := &Counter{}
	plain.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{SQL: "SELECT 1"})
	require.Equal(t, int64(1), plain.Counts().Statements)
	require.Empty(t, plain.Statements(), "no texts unless BySQL")
	require.Equal(t, Counts{Statements: 1}, plain.Counts().Sub(Counts{}))
}
