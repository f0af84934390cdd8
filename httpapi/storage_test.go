package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/memstore"
)

// storageAnswer is the body of GET /api/v1/storage.
type storageAnswer struct {
	At        time.Time `json:"at"`
	Warnings  []string  `json:"warnings"`
	Attention int       `json:"attention"`
	Tables    []struct {
		Name       string  `json:"name"`
		DeadRows   int64   `json:"dead_rows"`
		Dead       float64 `json:"dead_fraction"`
		TotalBytes int64   `json:"total_bytes"`
		Attention  string  `json:"attention"`
	} `json:"tables"`
}

// TestStoragePostgreSQL: GET /api/v1/storage reports the tables of the
// store with their dead rows, and the table that needs attention; a
// tenant-scoped caller is refused, and a query parameter is unknown.
func TestStoragePostgreSQL(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	en := newEnv(t, s)
	r := en.do(t, "*", "GET", "/api/v1/storage", nil)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var v storageAnswer
	require.NoError(t, json.Unmarshal(r.body, &v))
	require.Zero(t, v.Attention, "body: %s", r.body)
	require.NotNil(t, v.Warnings, "an array, not null")
	require.NotEmpty(t, v.Tables)

	pgtest.DeadTasks(t, pgtest.Pool(t), s.Schema(), 12_000)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) { // polled with a deadline: the statistics show a moment after the deletion
		r = en.do(t, "*", "GET", "/api/v1/storage", nil)
		require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
		require.NoError(t, json.Unmarshal(r.body, &v))
		if v.Attention > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the dead tasks never showed: %s", r.body)
	}
	require.Equal(t, 1, v.Attention)
	for _, tb := range v.Tables {
		if tb.Name == "tasks" {
			require.GreaterOrEqual(t, tb.DeadRows, int64(12_000))
			require.Contains(t, tb.Attention, "autovacuum is off")
		} else {
			require.Empty(t, tb.Attention, tb.Name)
		}
	}

	r = en.do(t, "acme", "GET", "/api/v1/storage", nil)
	require.Equal(t, http.StatusForbidden, r.status, "body: %s", r.body)
	require.Equal(t, "forbidden", r.json(t)["code"])
	r = en.do(t, "*", "GET", "/api/v1/storage?table=tasks", nil)
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
}

// TestStorageMemory: a store without tables answers 501.
func TestStorageMemory(t *testing.T) {
	t.Parallel()
	en := newEnv(t, memstore.New())
	r := en.do(t, "*", "GET", "/api/v1/storage", nil)
	require.Equal(t, http.StatusNotImplemented, r.status, "body: %s", r.body)
	require.Equal(t, "storage_unsupported", r.json(t)["code"])
}
