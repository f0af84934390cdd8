package memstore

import (
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/internal/dag"
)

// DriverUnit opens one unit of the in-memory driver (dag.Tx) for the
// driver suite (storetest.Driver), as the store's calls do: under the
// store's lock, the runs of ids that exist are loaded into a new change
// at now, and fn runs with the unit's Tx, the change and the loaded runs
// (by ID). When fn returns nil, the messages its change left for other
// runs are applied, as persist applies them after a commit.
//
// The store's lock is its unit: there is no rollback. What fn wrote
// through the Tx stays, whatever fn returns.
func DriverUnit(s *Store, now time.Time, ids []uuid.UUID, fn func(tx dag.Tx, c *dag.Change, runs map[uuid.UUID]*dag.Run) error) error {
	var n notes
	err := func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		loaded := map[uuid.UUID]*dag.Run{}
		for _, id := range ids {
			if s.runs[id] != nil {
				s.load(loaded, id)
			}
		}
		c := dag.NewChange(dag.Timestamp(now))
		if err := fn(&memTx{s: s, n: &n}, c, loaded); err != nil {
			return err
		}
		return s.deliver(c, &n)
	}()
	s.publish(&n)
	return err
}
