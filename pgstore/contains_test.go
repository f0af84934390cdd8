package pgstore_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

// TestContainsJSONIsJsonb: the input filter means one thing on both
// stores: dag.ContainsJSON (memstore) answers as the schema's input_json
// and jsonb's @> (pgstore) for random pairs of small JSON values, numbers
// written several ways, nested arrays and objects, and inputs that are
// not JSON.
func TestContainsJSONIsJsonb(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	rng := rand.New(rand.NewPCG(33, 1))
	scalars := []string{`null`, `true`, `false`, `1`, `1.0`, `1e0`, `10`, `-0`, `0`, `2.50`, `"1"`, `"a"`, `"b"`, `""`, `"\u00e9"`, `"é"`}
	keys := []string{"a", "b", "c"}
	var value func(depth int) string
	value = func(depth int) string {
		switch k := rng.IntN(4); {
		case depth == 0 || k < 2:
			return scalars[rng.IntN(len(scalars))]
		case k == 2:
			n := rng.IntN(4)
			parts := make([]string, n)
			for i := range parts {
				parts[i] = value(depth - 1)
			}
			return "[" + strings.Join(parts, ",") + "]"
		default:
			n := rng.IntN(3)
			parts := make([]string, n)
			for i := range parts {
				parts[i] = fmt.Sprintf("%q:%s", keys[rng.IntN(len(keys))], value(depth-1))
			}
			return "{" + strings.Join(parts, ",") + "}"
		}
	}
	type pair struct{ doc, sub string }
	var pairs []pair
	for range 3000 {
		pairs = append(pairs, pair{value(3), value(2)})
	}
	// Inputs that are not JSON contain nothing.
	for _, doc := range []string{"\xff{}", `{"a":"\u0000"}`, `{"a":1} x`, ``} {
		pairs = append(pairs, pair{doc, `{}`})
	}
	b := &pgx.Batch{}
	got := make([]bool, len(pairs))
	for i, p := range pairs {
		b.Queue(`SELECT coalesce(`+pgx.Identifier{schema}.Sanitize()+`.input_json($1::bytea) @> $2::jsonb, false)`, []byte(p.doc), p.sub).
			QueryRow(func(row pgx.Row) error { return row.Scan(&got[i]) })
	}
	require.NoError(t, pool.SendBatch(ctx, b).Close())
	matched := 0
	for i, p := range pairs {
		require.Equal(t, got[i], dag.ContainsJSON([]byte(p.doc), []byte(p.sub)), "%s @> %s", p.doc, p.sub)
		if got[i] {
			matched++
		}
	}
	require.Greater(t, matched, len(pairs)/20, "the pairs test matches too")
}
