package store

import (
	"context"

	"github.com/effectivelabs/durable/durabletype"
)

// StorageReader is implemented by stores that keep their state in tables
// of a database (pgstore), so that operators can see how large the tables
// are and how many dead rows vacuum has yet to reclaim. A store without
// tables (memstore) does not implement it, and Engine.Storage fails with
// ErrStorageUnsupported.
type StorageReader interface {
	// Storage reads the storage figures of every table of the store, as
	// its database's catalog and statistics report them, at a cost that
	// does not grow with the rows the tables hold (one catalog query). It
	// reports figures only: which tables need attention is the core's
	// (bloat.Judge), not the store's.
	Storage(ctx context.Context) (*durabletype.Storage, error)
}
