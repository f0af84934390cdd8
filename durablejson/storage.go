package durablejson

import (
	"time"

	"github.com/effectivelabs/durable/durabletype"
)

// Storage is the document of GET /api/v1/storage and "durable stats
// --storage --json": the storage of the store's tables (rows, dead rows,
// sizes, when vacuum last reached them) and the verdicts on them (see
// docs/operating.md, "Bloat").
type Storage struct {
	// At is when the figures were read, on the database's clock.
	At time.Time `json:"at"`
	// Autovacuum and TrackCounts are the server's settings of those
	// names.
	Autovacuum  bool `json:"autovacuum"`
	TrackCounts bool `json:"track_counts"`
	// Warnings are the verdicts about the server; empty when none.
	Warnings []string `json:"warnings"`
	// Attention counts the tables whose Attention is set.
	Attention int `json:"attention"`
	// Tables are the store's tables, ordered by name.
	Tables []TableStorage `json:"tables"`
}

// TableStorage is the storage of one table.
type TableStorage struct {
	Name string `json:"name"`
	// PartitionOf names the table this one is a partition of; empty for
	// a table that is not a partition.
	PartitionOf string `json:"partition_of"`
	LiveRows    int64  `json:"live_rows"`
	DeadRows    int64  `json:"dead_rows"`
	// DeadFraction is DeadRows / (LiveRows + DeadRows), 0 for an empty
	// table.
	DeadFraction float64 `json:"dead_fraction"`
	// TotalBytes is TableBytes (heap and TOAST) and IndexBytes.
	TotalBytes int64 `json:"total_bytes"`
	TableBytes int64 `json:"table_bytes"`
	IndexBytes int64 `json:"index_bytes"`
	// The times of the last vacuums and analyzes, null when never.
	LastVacuum      *time.Time `json:"last_vacuum"`
	LastAutovacuum  *time.Time `json:"last_autovacuum"`
	LastAnalyze     *time.Time `json:"last_analyze"`
	LastAutoanalyze *time.Time `json:"last_autoanalyze"`
	// Autovacuum is false when the table's settings turn autovacuum off
	// for it.
	Autovacuum bool `json:"autovacuum"`
	// Attention says why the table needs attention; empty when it does
	// not.
	Attention string `json:"attention"`
}

// NewStorage builds the document of st.
func NewStorage(st *durabletype.Storage) *Storage {
	out := &Storage{
		At: st.At.UTC(), Autovacuum: st.Autovacuum, TrackCounts: st.TrackCounts,
		Warnings: append([]string{}, st.Warnings...), Tables: make([]TableStorage, len(st.Tables)),
	}
	for i, t := range st.Tables {
		out.Tables[i] = TableStorage{
			Name: t.Name, PartitionOf: t.PartitionOf, LiveRows: t.LiveRows, DeadRows: t.DeadRows, DeadFraction: t.DeadFraction(),
			TotalBytes: t.TotalBytes, TableBytes: t.TableBytes, IndexBytes: t.IndexBytes,
			LastVacuum: Time(t.LastVacuum), LastAutovacuum: Time(t.LastAutovacuum),
			LastAnalyze: Time(t.LastAnalyze), LastAutoanalyze: Time(t.LastAutoanalyze),
			Autovacuum: t.Autovacuum, Attention: t.Attention,
		}
		if t.Attention != "" {
			out.Attention++
		}
	}
	return out
}
