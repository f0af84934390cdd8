package memstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/store"
	"github.com/effectivelabs/durable/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return memstore.New() })
}

func TestConformanceTx(t *testing.T) {
	t.Parallel()
	storetest.RunTx(t, func(t *testing.T) (store.TxFinisher, storetest.TxEffects) {
		var mu sync.Mutex
		kept := map[string]int{}
		return memstore.New(), storetest.TxEffects{
			Write: func(_ context.Context, tx any, key string) error {
				tx.(*memstore.Tx).OnCommit(func() {
					mu.Lock()
					kept[key]++
					mu.Unlock()
				})
				return nil
			},
			Count: func(_ *testing.T, key string) int {
				mu.Lock()
				defer mu.Unlock()
				return kept[key]
			},
		}
	})
}

func TestDriver(t *testing.T) {
	t.Parallel()
	storetest.Driver(t, func(t *testing.T) storetest.DriverHarness { return &harness{memstore.New()} })
}

// harness opens the in-memory driver's units (memstore.DriverUnit). The
// unit is the store's lock: nothing rolls back.
type harness struct{ s *memstore.Store }

func (h *harness) Store() store.Store { return h.s }

func (h *harness) RollsBack() bool { return false }

func (h *harness) Queues(context.Context) (*storetest.DriverQueues, error) {
	return memstore.Queues(h.s), nil
}

func (h *harness) Unit(_ context.Context, now time.Time, ids []uuid.UUID, fn func(u *storetest.DriverUnit) error) error {
	return memstore.DriverUnit(h.s, now, ids, func(tx dag.Tx, c *dag.Change, runs map[uuid.UUID]*dag.Run) error {
		return fn(&storetest.DriverUnit{Tx: tx, Change: c, Runs: runs})
	})
}
