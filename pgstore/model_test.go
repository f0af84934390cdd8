package pgstore_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/store/storetest"
)

// TestModel holds pgstore to memstore, the reference: random operation
// sequences must leave both in the same observable state at every step.
func TestModel(t *testing.T) {
	t.Parallel()
	seeds := 24
	if testing.Short() {
		seeds = 4
	}
	if n, err := strconv.Atoi(os.Getenv("DURABLE_MODEL_SEEDS")); err == nil {
		seeds = n // e.g. DURABLE_MODEL_SEEDS=500 for a longer search
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			storetest.Model(t, memstore.New(), pgtest.Store(t), int64(seed))
		})
	}
}
