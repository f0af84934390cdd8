// Package pgstore is the PostgreSQL implementation of the durable store.
//
// Every transition is one transaction that locks the rows it changes in a
// fixed order (runs by id, then ready-queue rows, then tenants by name), loads
// the runs it touches, lets the functional core (internal/core/dag) decide what
// happens, and writes exactly what the core changed with a handful of
// array-valued statements pipelined in one round trip. Claims are the only
// transition decided in SQL: one statement takes ready rows with FOR UPDATE
// SKIP LOCKED, in fair-queue order, and starts their tasks.
//
// The schema lives in its own PostgreSQL schema (Config.Schema) and is
// created by Migrate; New never changes the database.
package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// DefaultSchema is the schema used when Config.Schema is empty.
const DefaultSchema = "durable"

// Config configures a Store.
type Config struct {
	// Schema is the PostgreSQL schema holding the store's tables. It must
	// match ^[a-z_][a-z0-9_]{0,62}$. Defaults to durable.
	Schema string

	// Logger receives what the store's background connections report: the
	// listener and the leader elector losing their connections and
	// reconnecting; and, at WARN, the runs and schedules the store leaves
	// for a newer engine because it cannot read their shapes (once per
	// shape or schedule every five minutes). Defaults to slog.Default().
	Logger *slog.Logger

	// TxSteps is the most transactional steps (durable.TxStep) whose
	// transactions are open at once, each holding one of the pool's
	// connections while its step runs; the steps beyond wait for one. The
	// rest of the pool serves the engines' own calls (claims, outcomes,
	// heartbeats). Defaults to half the pool's MaxConns, at least 1; a
	// value of MaxConns or more is refused.
	TxSteps int

	// LeaderLease is how long a leadership lasts without being renewed
	// (see Store.Lead): the leader renews its lease every third of it, and
	// a leader that froze, or was cut off from the database, loses its
	// duties within it; another engine takes over when it has expired.
	// Every engine sharing a schema should use the same lease. Defaults to
	// DefaultLeaderLease; at least 100ms.
	LeaderLease time.Duration

	// Pooler says what stands between the pool and PostgreSQL: nothing or
	// a pooler in session mode (PoolerNone, the default), or a pooler in
	// transaction mode (PoolerTransaction: PgBouncer's pool_mode =
	// transaction, the "pooled" URL of most managed PostgreSQL), which
	// gives the pool's connections a server session for one transaction at
	// a time. With PoolerTransaction the store keeps nothing in a session
	// between its transactions, and New refuses a pool that prepares named
	// statements (pgx's default, QueryExecModeCacheStatement): set the
	// pool's ConnConfig.DefaultQueryExecMode to pgx.QueryExecModeCacheDescribe
	// (or add default_query_exec_mode=cache_describe to its URL). Without
	// Direct, the store does not LISTEN (a transaction pooler loses the
	// notifications) and engines on it find their work by polling (see
	// docs/operating.md, "Connection poolers").
	Pooler Pooler

	// Direct, when set, is the connection the store opens, besides its
	// pool, for what needs a session of its own: LISTEN for the engines'
	// wake-ups and the leader election. Give it the direct URL of a
	// database whose pool goes through a transaction pooler (parse it
	// with pgx.ParseConfig). Defaults to the pool's connection settings.
	Direct *pgx.ConnConfig
}

// DefaultLeaderLease is the default Config.LeaderLease.
const DefaultLeaderLease = 15 * time.Second

// Pooler is what stands between a Store's pool and PostgreSQL
// (Config.Pooler).
type Pooler string

// The poolers a Store knows how to work behind.
const (
	// PoolerNone: direct connections, or a pooler in session mode, where
	// each of the pool's connections keeps its server session.
	PoolerNone Pooler = ""
	// PoolerSession names a pooler in session mode; the store works as
	// with PoolerNone.
	PoolerSession Pooler = "session"
	// PoolerTransaction: a pooler in transaction mode, where a connection
	// has a server session for one transaction at a time.
	PoolerTransaction Pooler = "transaction"
)

// ParsePooler parses a Pooler: "", "none", "session" or "transaction".
func ParsePooler(s string) (Pooler, error) {
	switch s {
	case "", "none":
		return PoolerNone, nil
	case string(PoolerSession), string(PoolerTransaction):
		return Pooler(s), nil
	}
	return "", fmt.Errorf("%w %q: use none, session or transaction", ErrInvalidPooler, s)
}

// ErrInvalidPooler is returned for an unknown Pooler, and by New for a pool
// whose query execution mode the store cannot work in behind that pooler
// (or at all: the simple protocol and QueryExecModeExec).
var ErrInvalidPooler = errors.New("pgstore: invalid pooler")

// Store is a store.Store backed by PostgreSQL. It is safe for concurrent
// use; create it with New.
type Store struct {
	pool    *pgxpool.Pool
	schema  string
	channel string
	q       queries
	log     *slog.Logger

	mu     sync.Mutex
	shapes map[uuid.UUID]*dag.Compiled // decoded and compiled shapes; immutable
	stored map[uuid.UUID]time.Time     // when shapes were last made sure of in the database
	warned map[uuid.UUID]time.Time     // when an unreadable shape was last logged (unread.go)

	// incoming is set when the incoming table may hold tasks to promote.
	// priorities: the last claim saw ready tasks above the default
	// priority; the next claim reorders their lanes first (priority.go).
	priorities atomic.Bool
	incoming   atomic.Bool
	// lease is Config.LeaderLease; elected is the elector's state, and
	// campaign wakes the candidates of this store when a leader gave its
	// lease up (a notification; elector.go).
	lease    time.Duration
	elected  electorState
	campaign chan struct{}
	// inboxMark is the newest pending message the leader's previous pass
	// saw: the next pass applies those up to it that are still pending.
	inboxMark atomic.Int64
	// txSlots holds one token per open transaction of a step (FinishTx).
	txSlots chan struct{}
	// direct is the configuration of the store's dedicated connections
	// (listener, elector): Config.Direct, or the pool's. deaf is set when
	// the store cannot LISTEN: behind a transaction pooler without
	// Config.Direct.
	direct *pgx.ConnConfig
	deaf   bool
	// router sends statements to the history's partitions (history.go).
	router router
}

var (
	_ store.Store     = (*Store)(nil)
	_ store.Listener  = (*Store)(nil)
	_ store.Elector   = (*Store)(nil)
	_ store.TxCreator = (*Store)(nil)
	_ store.Clocked   = (*Store)(nil)
)

var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ErrInvalidSchema is returned for a schema name that does not match
// ^[a-z_][a-z0-9_]{0,62}$.
var ErrInvalidSchema = errors.New("pgstore: invalid schema name")

func checkSchema(schema string) (string, error) {
	if schema == "" {
		schema = DefaultSchema
	}
	if !schemaRE.MatchString(schema) {
		return "", fmt.Errorf("%w %q: use 1-63 lowercase letters, digits or underscores, not starting with a digit", ErrInvalidSchema, schema)
	}
	return schema, nil
}

// New returns a Store using pool. It does not touch the database: run
// Migrate first to create the schema.
func New(pool *pgxpool.Pool, cfg *Config) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgstore: nil pool")
	}
	if cfg == nil {
		cfg = &Config{}
	}
	schema, err := checkSchema(cfg.Schema)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	maxConns := int(pool.Config().MaxConns)
	txSteps := cfg.TxSteps
	switch {
	case txSteps < 0:
		return nil, fmt.Errorf("pgstore: Config.TxSteps %d: must not be negative", txSteps)
	case txSteps == 0:
		txSteps = max(1, maxConns/2)
	case txSteps >= maxConns:
		return nil, fmt.Errorf("pgstore: Config.TxSteps %d: the pool's MaxConns is %d, and the engines need at least one connection besides", txSteps, maxConns)
	}
	if _, err := ParsePooler(string(cfg.Pooler)); err != nil {
		return nil, fmt.Errorf("pgstore: Config.Pooler: %w", err)
	}
	if err := checkExecMode(pool.Config().ConnConfig.DefaultQueryExecMode, cfg.Pooler); err != nil {
		return nil, err
	}
	lease := cfg.LeaderLease
	switch {
	case lease == 0:
		lease = DefaultLeaderLease
	case lease < minLeaderLease:
		return nil, fmt.Errorf("pgstore: Config.LeaderLease %s: must be at least %s", lease, minLeaderLease)
	}
	direct := pool.Config().ConnConfig
	if cfg.Direct != nil {
		direct = cfg.Direct.Copy()
	}
	st := &Store{
		direct:   direct,
		deaf:     cfg.Pooler == PoolerTransaction && cfg.Direct == nil,
		txSlots:  make(chan struct{}, txSteps),
		pool:     pool,
		log:      log.With(slog.String("schema", schema)),
		schema:   schema,
		channel:  Channel(schema),
		q:        newQueries(schema),
		shapes:   make(map[uuid.UUID]*dag.Compiled),
		stored:   make(map[uuid.UUID]time.Time),
		warned:   make(map[uuid.UUID]time.Time),
		lease:    lease,
		campaign: make(chan struct{}, 1),
	}
	st.router.args = routesFor(schema)
	st.incoming.Store(true)
	return st, nil
}

// checkExecMode refuses the pool's query execution modes that the store's
// statements cannot run in behind pooler: anywhere, the simple protocol and
// QueryExecModeExec encode parameters without their types, which pgx cannot
// do for the store's arrays; and behind a transaction pooler, the named
// statements of QueryExecModeCacheStatement, which live in a server session
// the next transaction may not have ("prepared statement ... does not
// exist", or "already exists" on a session another client prepared it in).
func checkExecMode(mode pgx.QueryExecMode, pooler Pooler) error {
	switch mode {
	case pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec:
		return fmt.Errorf("%w: the pool's query execution mode is %s, which sends parameters without their types: "+
			"use cache_statement (the default) on a direct connection, cache_describe behind a transaction pooler "+
			"(default_query_exec_mode in the URL, or ConnConfig.DefaultQueryExecMode)", ErrInvalidPooler, mode)
	case pgx.QueryExecModeCacheStatement:
		if pooler == PoolerTransaction {
			return fmt.Errorf("%w: Config.Pooler is transaction, but the pool prepares named statements (query execution mode %s), "+
				"which a transaction pooler does not keep between transactions: set the pool's ConnConfig.DefaultQueryExecMode "+
				"to pgx.QueryExecModeCacheDescribe (or add default_query_exec_mode=cache_describe to its URL)", ErrInvalidPooler, mode)
		}
	}
	return nil
}

// KeepsTime implements store.Clocked: every time the store records or
// compares (claims, heartbeats, due times, deadness) is PostgreSQL's, so
// engines sharing it agree whatever their own clocks say.
func (s *Store) KeepsTime() bool { return true }

// Schema returns the schema the store uses.
func (s *Store) Schema() string { return s.schema }

// Channel returns the LISTEN/NOTIFY channel of a schema: "durable:<schema>",
// shortened with a hash when that exceeds PostgreSQL's 63-byte identifiers.
func Channel(schema string) string {
	c := "durable:" + schema
	if len(c) <= 63 {
		return c
	}
	sum := sha256.Sum256([]byte(schema))
	return fmt.Sprintf("durable:%s:%x", schema[:38], sum[:8])
}

// lockKey derives a 64-bit advisory lock key for a purpose within a schema.
func lockKey(purpose, schema string, extra ...string) int64 {
	h := fnv.New64a()
	h.Write([]byte("durable/" + purpose + "/" + schema))
	for _, e := range extra {
		h.Write([]byte{0})
		h.Write([]byte(e))
	}
	return int64(h.Sum64())
}

// render substitutes the quoted schema name into a SQL template.
func render(schema, sql string) string {
	return strings.ReplaceAll(sql, "{{schema}}", pgx.Identifier{schema}.Sanitize())
}

// ---- shapes -----------------------------------------------------------------

// shapeTrust is how long the store trusts that a shape it inserted is still
// there: retention removes shapes that no run uses and that no store made
// sure of for shapeGrace, so a store makes sure again (inserting it, or
// refreshing its used_at) at least this often before it uses one.
const (
	shapeTrust = 10 * time.Minute
	shapeGrace = time.Hour
)

// shapeKnown reports whether shape id was made sure of recently enough to
// be used without inserting it; s.mu must be held.
func (s *Store) shapeKnown(id uuid.UUID) bool {
	at, ok := s.stored[id]
	return ok && time.Since(at) < shapeTrust
}

// shapeID is the identity of a shape: the first 16 bytes of the SHA-256 of
// its canonical JSON.
func shapeID(js []byte) uuid.UUID {
	sum := sha256.Sum256(js)
	var id uuid.UUID
	copy(id[:], sum[:16])
	return id
}

// compileShape validates a shape and returns its identity, canonical JSON
// and compiled form, from the cache when possible.
func (s *Store) compileShape(sh *durabletype.Shape) (uuid.UUID, []byte, *dag.Compiled, error) {
	if sh == nil {
		_, err := dag.Compile(nil)
		return uuid.UUID{}, nil, nil, err
	}
	js, err := json.Marshal(sh)
	if err != nil {
		return uuid.UUID{}, nil, nil, fmt.Errorf("encode shape: %w", err)
	}
	id := shapeID(js)
	s.mu.Lock()
	c, ok := s.shapes[id]
	s.mu.Unlock()
	if ok {
		return id, js, c, nil
	}
	// Compile a private copy so that later changes by the caller cannot
	// reach the cache.
	var cp durabletype.Shape
	if err := json.Unmarshal(js, &cp); err != nil {
		return uuid.UUID{}, nil, nil, fmt.Errorf("decode shape: %w", err)
	}
	c, err = dag.Compile(&cp)
	if err != nil {
		return uuid.UUID{}, nil, nil, err
	}
	s.mu.Lock()
	if prev, ok := s.shapes[id]; ok {
		c = prev
	} else {
		s.shapes[id] = c
	}
	s.mu.Unlock()
	return id, js, c, nil
}

// shapesFor returns the compiled shapes of ids, loading the ones not cached.
// A shape this engine cannot read (dag.ReadShape) is not an error of the
// call: it is missing from the shapes returned, and unread holds its
// *durabletype.ShapeError; the caller leaves the runs that need it alone.
func (s *Store) shapesFor(ctx context.Context, q querier, ids []uuid.UUID) (shapes map[uuid.UUID]*dag.Compiled, unread map[uuid.UUID]error, err error) {
	out := make(map[uuid.UUID]*dag.Compiled, len(ids))
	var missing []uuid.UUID
	s.mu.Lock()
	for _, id := range ids {
		if _, done := out[id]; done {
			continue
		}
		if c, ok := s.shapes[id]; ok {
			out[id] = c
		} else {
			out[id] = nil
			missing = append(missing, id)
		}
	}
	s.mu.Unlock()
	if len(missing) == 0 {
		return out, nil, nil
	}
	rows, err := q.Query(ctx, s.q.loadShapes, u16(missing))
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: load shapes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var js []byte
		if err := rows.Scan(p16(&id), &js); err != nil {
			return nil, nil, fmt.Errorf("pgstore: load shapes: %w", err)
		}
		c, err := dag.ReadShape(id.String(), js)
		if err != nil {
			// Not cached: an engine that cannot read a shape now will not
			// read it later, but the cache holds only what compiled.
			if unread == nil {
				unread = make(map[uuid.UUID]error)
			}
			unread[id] = err
			delete(out, id)
			continue
		}
		s.mu.Lock()
		if prev, ok := s.shapes[id]; ok {
			c = prev
		} else {
			s.shapes[id] = c
		}
		s.mu.Unlock()
		out[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("pgstore: load shapes: %w", err)
	}
	for id, c := range out {
		if c == nil {
			return nil, nil, fmt.Errorf("pgstore: shape %s not found", id)
		}
	}
	return out, unread, nil
}

// querier is what pgx.Tx, *pgx.Conn and *pgxpool.Pool have in common.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// ---- value helpers ----------------------------------------------------------

// stamp is a nullable timestamptz parameter: NULL for the zero time.
func stamp(t time.Time) pgtype.Timestamptz {
	if t.IsZero() {
		return pgtype.Timestamptz{}
	}
	return pgtype.Timestamptz{Time: t, Valid: true}
}

// u16 and p16 pass UUIDs to pgx as [16]byte, which it encodes and decodes
// in binary; uuid.UUID would go through its driver.Valuer and sql.Scanner
// methods, in text, at several times the cost.
func u16(ids []uuid.UUID) [][16]byte {
	out := make([][16]byte, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

func p16(id *uuid.UUID) *[16]byte { return (*[16]byte)(id) }

// tm converts a scanned nullable timestamptz.
func tm(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time
}

// nowOf returns the transition time of a params struct: its Now truncated
// to microseconds, or the zero time to mean the database's now().
func nowOf(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return dag.Timestamp(t)
}
