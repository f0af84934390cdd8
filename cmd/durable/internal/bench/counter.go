package bench

import (
	"cmp"
	"context"
	"encoding/binary"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Counter counts what a pool and the connections copied from its
// configuration (pgstore's listener and elector) send to PostgreSQL:
//
//   - Statements: every Query, QueryRow and Exec call (BEGIN and COMMIT
//     included) and every query of a batch, as a pgx tracer sees them.
//   - RoundTrips: Query and Sync protocol messages, each of which ends one
//     unit of work on the server (an implicit transaction unless one is
//     open). Unlike the tracer, this sees the pings that pgx sends below it
//     (pool health checks on acquire, the leader's connection check), and
//     the Parse round trip that prepares a statement on first use.
//   - Pings: pool pings on acquire (a connection idle for over a second).
//   - Transactions: the statements that begin one (pgx's Begin sends
//     "begin"); a statement sent alone is a transaction of its own too,
//     which this does not count.
//
// With BySQL set before the pool is made, it also counts each statement's
// text (Statements).
//
// Attach it with Instrument before creating the pool.
type Counter struct {
	statements   atomic.Int64
	roundTrips   atomic.Int64
	pings        atomic.Int64
	transactions atomic.Int64

	// BySQL counts the statements by their text (normalized by sqlKey).
	BySQL bool
	bySQL sync.Map // sqlKey -> *atomic.Int64
}

// Counts is a snapshot of a Counter.
type Counts struct {
	Statements, RoundTrips, Pings, Transactions int64
}

// Sub returns c - o.
func (c Counts) Sub(o Counts) Counts {
	return Counts{c.Statements - o.Statements, c.RoundTrips - o.RoundTrips, c.Pings - o.Pings, c.Transactions - o.Transactions}
}

// Counts returns the counts so far.
func (c *Counter) Counts() Counts {
	return Counts{c.statements.Load(), c.roundTrips.Load(), c.pings.Load(), c.transactions.Load()}
}

// StatementCount is how many times a statement was sent.
type StatementCount struct {
	SQL string // its text, normalized by sqlKey
	N   int64
}

// Statements returns the counts by statement (BySQL), the most sent
// first.
func (c *Counter) Statements() []StatementCount {
	var out []StatementCount
	c.bySQL.Range(func(k, v any) bool {
		out = append(out, StatementCount{SQL: k.(string), N: v.(*atomic.Int64).Load()})
		return true
	})
	slices.SortFunc(out, func(a, b StatementCount) int { return cmp.Or(cmp.Compare(b.N, a.N), cmp.Compare(a.SQL, b.SQL)) })
	return out
}

// sqlKeyLen is how much of a statement's text names it in Statements.
const sqlKeyLen = 90

// sqlKey is a statement's text with its whitespace runs made one space,
// cut to sqlKeyLen bytes.
func sqlKey(sql string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.TrimSpace(sql) {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		if b.Len() >= sqlKeyLen {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isBegin reports whether sql begins a transaction: "begin" (pgx's), or
// "BEGIN; ..." (a BeginQuery), in any case.
func isBegin(sql string) bool {
	sql = strings.TrimLeftFunc(sql, unicode.IsSpace)
	if len(sql) < 5 || !strings.EqualFold(sql[:5], "begin") {
		return false
	}
	return len(sql) == 5 || sql[5] == ';' || unicode.IsSpace(rune(sql[5]))
}

func (c *Counter) count(sql string) {
	c.statements.Add(1)
	if isBegin(sql) {
		c.transactions.Add(1)
	}
	if c.BySQL {
		k := sqlKey(sql)
		v, ok := c.bySQL.Load(k)
		if !ok {
			v, _ = c.bySQL.LoadOrStore(k, new(atomic.Int64))
		}
		v.(*atomic.Int64).Add(1)
	}
}

// Instrument makes cfg count into c. It keeps pgx's default ping policy.
func (c *Counter) Instrument(cfg *pgxpool.Config) {
	cfg.ConnConfig.Tracer = c
	cfg.ConnConfig.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(r, &wireCounter{w: w, n: &c.roundTrips})
	}
	cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		if p.IdleDuration > time.Second { // pgx's default
			c.pings.Add(1)
			return true
		}
		return false
	}
}

// InstrumentConn makes a single connection's config count into c.
func (c *Counter) InstrumentConn(cfg *pgx.ConnConfig) {
	cfg.Tracer = c
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(r, &wireCounter{w: w, n: &c.roundTrips})
	}
}

// TraceQueryStart implements pgx.QueryTracer.
func (c *Counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.count(d.SQL)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *Counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (c *Counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (c *Counter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.count(d.SQL)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (c *Counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// wireCounter passes a connection's outgoing bytes through and counts the
// Query ('Q') and Sync ('S') messages among them. The first message on a
// connection is the startup message, which has no type byte.
type wireCounter struct {
	w io.Writer
	n *atomic.Int64

	mu      sync.Mutex
	started bool
	hdr     []byte
	skip    int
}

func (c *wireCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.scan(p)
	c.mu.Unlock()
	return c.w.Write(p)
}

func (c *wireCounter) scan(p []byte) {
	for len(p) > 0 {
		if c.skip > 0 {
			n := min(c.skip, len(p))
			c.skip -= n
			p = p[n:]
			continue
		}
		hlen := 5 // type byte and length
		if !c.started {
			hlen = 4 // the startup message: length only
		}
		n := min(hlen-len(c.hdr), len(p))
		c.hdr = append(c.hdr, p[:n]...)
		p = p[n:]
		if len(c.hdr) < hlen {
			return
		}
		length := c.hdr[hlen-4:]
		c.skip = max(int(binary.BigEndian.Uint32(length))-4, 0)
		if !c.started {
			c.started = true
		} else if t := c.hdr[0]; t == 'Q' || t == 'S' {
			c.n.Add(1)
		}
		c.hdr = c.hdr[:0]
	}
}
