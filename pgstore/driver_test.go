package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
	"github.com/effectivelabs/durable/store/storetest"
)

func TestDriver(t *testing.T) {
	t.Parallel()
	storetest.Driver(t, func(t *testing.T) storetest.DriverHarness { return &harness{pgtest.Store(t)} })
}

// harness opens the PostgreSQL driver's units (pgstore.DriverUnit), each
// a transaction of the store's own.
type harness struct{ s *pgstore.Store }

func (h *harness) Store() store.Store { return h.s }

func (h *harness) RollsBack() bool { return true }

func (h *harness) Queues(ctx context.Context) (*storetest.DriverQueues, error) {
	return pgstore.Queues(ctx, h.s)
}

func (h *harness) Unit(ctx context.Context, now time.Time, ids []uuid.UUID, fn func(u *storetest.DriverUnit) error) error {
	return pgstore.DriverUnit(ctx, h.s, now, ids, func(tx dag.Tx, c *dag.Change, runs map[uuid.UUID]*dag.Run) error {
		return fn(&storetest.DriverUnit{Tx: tx, Change: c, Runs: runs})
	})
}

// TestWriteTakesItsChange: a unit's Write writes the change it is passed,
// which must be its unit's; another change fails it rather than have the
// unit's written in its place.
func TestWriteTakesItsChange(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	ctx := context.Background()
	now := time.Now()
	err := pgstore.DriverUnit(ctx, s, now, nil, func(tx dag.Tx, c *dag.Change, _ map[uuid.UUID]*dag.Run) error {
		require.ErrorIs(t, tx.Write(ctx, dag.NewChange(now)), pgstore.ErrOtherChange)
		return tx.Write(ctx, c)
	})
	require.NoError(t, err)
}
