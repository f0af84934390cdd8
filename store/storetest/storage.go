package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/store"
)

// testStorage: a store with tables (store.StorageReader) reports each of
// them once, ordered by name, with figures that add up: the total is the
// table and its indexes, no count is negative, and the read has a time. A
// store without tables is skipped: it reports nothing, and the engine
// says so (durable.ErrStorageUnsupported).
func testStorage(t *testing.T, st store.Store) {
	r, ok := st.(store.StorageReader)
	if !ok {
		t.Skip("store has no tables")
	}
	s, err := r.Storage(ctx)
	require.NoError(t, err)
	require.False(t, s.At.IsZero())
	require.NotEmpty(t, s.Tables)
	for i, tb := range s.Tables {
		require.NotEmpty(t, tb.Name)
		if i > 0 {
			require.Less(t, s.Tables[i-1].Name, tb.Name, "ordered by name, each once")
		}
		require.GreaterOrEqual(t, tb.LiveRows, int64(0), tb.Name)
		require.GreaterOrEqual(t, tb.DeadRows, int64(0), tb.Name)
		require.Positive(t, tb.TableBytes, tb.Name)
		require.GreaterOrEqual(t, tb.IndexBytes, int64(0), tb.Name)
		require.Equal(t, tb.TableBytes+tb.IndexBytes, tb.TotalBytes, tb.Name)
		require.Empty(t, tb.Attention, "a store reports figures; the engine judges them")
		require.InDelta(t, 0.5, tb.DeadFraction(), 0.5, tb.Name)
	}
	require.Empty(t, s.Warnings, "a store reports figures; the engine judges them")
}
