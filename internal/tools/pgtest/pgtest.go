// Package pgtest provides helpers for tests that need PostgreSQL.
//
// The database URL comes from the DURABLE_TEST_DATABASE_URL environment
// variable. Without it PostgreSQL tests are skipped, except under CI=true,
// where they fail: CI must not pass by skipping them. Each test works in its
// own freshly migrated schema, dropped when the test ends, so tests run in
// parallel and leave nothing behind.
//
// Every package with PostgreSQL tests calls NoteSkipped from its TestMain,
// so that go test ./... says when they were skipped even without -v.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable/pgstore"
)

// EnvURL is the environment variable holding the test database URL.
const EnvURL = "DURABLE_TEST_DATABASE_URL"

// DefaultMaxConns is the size of the shared pool unless the URL sets
// pool_max_conns: modest, since test binaries run side by side.
const DefaultMaxConns = 12

// URL returns the test database URL, or skips the test (fails it under
// CI=true) when none is configured.
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(EnvURL)
	if url == "" {
		msg := fmt.Sprintf("PostgreSQL tests need %s, e.g. %s=postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
			EnvURL, EnvURL)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true: not skipping)")
		}
		skipped.Store(true)
		t.Skip(msg)
	}
	return url
}

var shared struct {
	mu   sync.Mutex
	pool *pgxpool.Pool
	err  error
}

// Pool returns the pool shared by the tests of this binary, creating it on
// first use. Close it from TestMain with ClosePool.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := URL(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.pool == nil && shared.err == nil {
		shared.pool, shared.err = newPool(url)
	}
	if shared.err != nil {
		t.Fatalf("pgtest: %v", shared.err)
	}
	return shared.pool
}

func newPool(url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", EnvURL, err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to %s: %w", EnvURL, err)
	}
	return pool, nil
}

// ClosePool closes the shared pool, if it was opened. Call it from TestMain
// after the tests ran (and before checking for leaked goroutines).
func ClosePool() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.pool != nil {
		shared.pool.Close()
		shared.pool = nil
	}
}

// NewSchemaName returns a random schema name for a test.
func NewSchemaName() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24
	return "durable_test_" + hex.EncodeToString(b[:])
}

// EmptySchema returns the name of a new schema that does not exist yet and
// is dropped (if it exists then) when the test ends.
func EmptySchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	schema := NewSchemaName()
	t.Cleanup(func() { DropSchema(t, pool, schema) })
	return schema
}

// Schema creates and migrates a new schema for the test and returns its
// name; it is dropped when the test ends.
func Schema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	schema := EmptySchema(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pgstore.Migrate(ctx, pool, &pgstore.MigrateConfig{Schema: schema}); err != nil {
		t.Fatalf("pgtest: migrate %s: %v", schema, err)
	}
	return schema
}

// Store returns a store on a fresh schema of the shared pool.
func Store(t testing.TB) *pgstore.Store {
	t.Helper()
	pool := Pool(t)
	s, err := pgstore.New(pool, &pgstore.Config{Schema: Schema(t, pool)})
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return s
}

// DropSchema drops schema and all it holds, if it exists, failing t if it
// cannot. A session that is still ending (a backend whose client hung up a
// moment ago) can make the drop lose a deadlock: the drop is rolled back,
// and taken again.
func DropSchema(t testing.TB, pool *pgxpool.Pool, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for attempt := 1; ; attempt++ {
		_, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		var pgErr *pgconn.PgError
		if err != nil && attempt < 5 && errors.As(err, &pgErr) && pgErr.Code == "40P01" {
			continue
		}
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		return
	}
}
