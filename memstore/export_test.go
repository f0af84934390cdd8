package memstore

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store/storetest"
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

// Queues returns the store's queue entries, for the driver suite: the
// ready queue in the order of fair ids, and the parked tasks of each
// concurrency key, oldest first.
func Queues(s *Store) *storetest.DriverQueues {
	s.mu.Lock()
	defer s.mu.Unlock()
	entry := func(k taskKey) storetest.QueueEntry {
		return storetest.QueueEntry{RunID: k.run, Step: s.runs[k.run].task(k).Name}
	}
	keys := slices.Collect(maps.Keys(s.queued))
	slices.SortFunc(keys, func(a, b taskKey) int {
		return cmp.Or(cmp.Compare(s.queued[a], s.queued[b]),
			cmp.Compare(s.runs[a.run].rec.Workflow, s.runs[b.run].rec.Workflow))
	})
	q := &storetest.DriverQueues{Parked: map[string][]storetest.QueueEntry{}}
	for _, k := range keys {
		q.Ready = append(q.Ready, entry(k))
	}
	for key, list := range s.parked {
		for _, k := range list {
			q.Parked[key] = append(q.Parked[key], entry(k))
		}
	}
	return q
}
