package durabletype

import "time"

// Storage is what a store's tables hold on disk and how well vacuum keeps
// up with them: the figures an operator watches to see bloat (dead rows
// that vacuum has not reclaimed yet) before it slows the engine down.
// pgstore reads it from PostgreSQL's catalog and statistics views; a store
// without tables (memstore) has none.
type Storage struct {
	// At is when the figures were read, on the store's clock.
	At time.Time
	// Autovacuum reports whether autovacuum is on for the whole server
	// (PostgreSQL's autovacuum setting).
	Autovacuum bool
	// TrackCounts reports whether the server counts rows (PostgreSQL's
	// track_counts setting): without it the row counts are all zero and
	// autovacuum cannot run.
	TrackCounts bool
	// Tables has one entry per table of the store, ordered by name.
	Tables []TableStorage
	// Warnings are the verdicts about the whole store (autovacuum or row
	// counting off on the server), one sentence each, in the order the
	// rule finds them; none when all is well. The engine fills them
	// (Engine.Storage), by one rule for every caller.
	Warnings []string
}

// TableStorage is the storage of one table of a store.
type TableStorage struct {
	// Name is the table's name, without its schema.
	Name string
	// PartitionOf names the table this one is a partition of; empty for
	// a table that is not a partition.
	PartitionOf string
	// LiveRows and DeadRows are the server's estimates of the table's live
	// rows and of its dead row versions (deleted or updated away, not yet
	// reclaimed by vacuum).
	LiveRows, DeadRows int64
	// TotalBytes is the table's whole size: its heap, its TOAST data and
	// its indexes. TableBytes is the heap with TOAST, IndexBytes the
	// indexes.
	TotalBytes, TableBytes, IndexBytes int64
	// LastVacuum and LastAutovacuum are when the table was last vacuumed
	// by hand and by autovacuum, LastAnalyze and LastAutoanalyze when it
	// was last analyzed; zero when never (since the server's statistics
	// were last reset).
	LastVacuum, LastAutovacuum, LastAnalyze, LastAutoanalyze time.Time
	// Autovacuum is false when the table's own settings turn autovacuum
	// off for it (autovacuum_enabled = false); true otherwise, even when
	// the server's autovacuum is off (Storage.Autovacuum).
	Autovacuum bool
	// Attention, when not empty, says in one sentence why the table needs
	// an operator's attention (it has many dead rows, and vacuum is
	// behind or off); empty when it does not. The engine fills it
	// (Engine.Storage), by one rule for every caller.
	Attention string
}

// DeadFraction is the share of the table's row versions that are dead:
// DeadRows / (LiveRows + DeadRows), 0 for an empty table.
func (t TableStorage) DeadFraction() float64 {
	if t.DeadRows <= 0 {
		return 0
	}
	return float64(t.DeadRows) / float64(t.LiveRows+t.DeadRows)
}
