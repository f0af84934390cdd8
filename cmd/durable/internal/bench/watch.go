package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// watcher learns which runs settled from the store's notifications (one
// "run:<id>" per settled run on the schema's channel), on a dedicated
// connection, so that waiting for the work to finish costs the database
// nothing. Notifications can be lost (a dropped connection), so waits fall
// back to asking the database when nothing arrives for a while.
type watcher struct {
	b      *bencher
	conn   *pgx.Conn
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	settled map[uuid.UUID]struct{}
	want    map[uuid.UUID]struct{} // counted runs; set before they can settle
	counted int
	changed chan struct{} // closed and replaced on every notification
	err     error
}

func (b *bencher) watch(ctx context.Context) (*watcher, error) {
	cfg, err := pgx.ParseConfig(b.url)
	if err != nil {
		return nil, err
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = b.appName("watcher")
	b.monCount.InstrumentConn(cfg)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting the watcher: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{pgstore.Channel(b.schema)}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("listening: %w", err)
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &watcher{
		b: b, conn: conn, cancel: cancel, done: make(chan struct{}),
		settled: map[uuid.UUID]struct{}{}, changed: make(chan struct{}),
	}
	go w.loop(lctx)
	return w, nil
}

func (w *watcher) loop(ctx context.Context) {
	defer close(w.done)
	prefix := string(store.TopicRun) + ":"
	for {
		n, err := w.conn.WaitForNotification(ctx)
		if err != nil {
			w.mu.Lock()
			if ctx.Err() == nil {
				w.err = err
			}
			close(w.changed)
			w.changed = make(chan struct{})
			w.mu.Unlock()
			return
		}
		s, ok := strings.CutPrefix(n.Payload, prefix)
		if !ok {
			continue
		}
		id, err := uuid.Parse(s)
		if err != nil {
			continue
		}
		w.mu.Lock()
		if _, dup := w.settled[id]; !dup {
			w.settled[id] = struct{}{}
			if _, ok := w.want[id]; ok {
				w.counted++
			}
		}
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
	}
}

func (w *watcher) close() {
	w.cancel()
	<-w.done
	w.conn.Close(context.Background())
}

// expect sets the runs that waitAll counts; call it before they can settle.
func (w *watcher) expect(ids map[uuid.UUID]struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.want = ids
	w.counted = 0
	for id := range w.settled {
		if _, ok := ids[id]; ok {
			w.counted++
		}
	}
}

// waitAll waits until the expected runs have all settled. When no
// notification arrives for 2s it counts them in the database instead (by
// their tenants' pattern; child runs, which the bench never expects, do
// not count). It returns how many settled, and ctx's error or
// nil.
func (w *watcher) waitAll(ctx context.Context, tenants string) (int, error) {
	total := len(w.want)
	quiet := time.NewTimer(2 * time.Second)
	defer quiet.Stop()
	polling := false
	for {
		w.mu.Lock()
		n, ch, werr := w.counted, w.changed, w.err
		w.mu.Unlock()
		if n >= total {
			return n, nil
		}
		if werr != nil && !polling {
			w.b.logf("watcher lost its connection (%v); polling", werr)
			polling = true
			quiet.Reset(0)
		}
		select {
		case <-ch:
			if !quiet.Stop() {
				select {
				case <-quiet.C:
				default:
				}
			}
			quiet.Reset(2 * time.Second)
		case <-quiet.C:
			var settled int
			err := w.b.monitor.QueryRow(ctx, `SELECT count(*) FROM `+w.b.table("runs")+
				` WHERE tenant LIKE $1 AND parent_id IS NULL AND finished_at IS NOT NULL`, tenants).Scan(&settled)
			if err != nil {
				if ctx.Err() != nil {
					return n, ctx.Err()
				}
				return n, err
			}
			if settled >= total {
				return settled, nil
			}
			w.b.logf("runs settled so far: %d of %d", max(n, settled), total)
			if polling {
				quiet.Reset(500 * time.Millisecond)
			} else {
				quiet.Reset(2 * time.Second)
			}
		case <-ctx.Done():
			return n, ctx.Err()
		}
	}
}

// waitRun waits until run id has settled, asking the database when no
// notification says so within 2s.
func (w *watcher) waitRun(ctx context.Context, id uuid.UUID) error {
	quiet := time.NewTimer(2 * time.Second)
	defer quiet.Stop()
	polling := false
	for {
		w.mu.Lock()
		_, ok := w.settled[id]
		ch, werr := w.changed, w.err
		w.mu.Unlock()
		if ok {
			return nil
		}
		if werr != nil && !polling {
			polling = true
			quiet.Reset(0)
		}
		select {
		case <-ch:
		case <-quiet.C:
			var settled bool
			err := w.b.monitor.QueryRow(ctx, `SELECT finished_at IS NOT NULL FROM `+w.b.table("runs")+` WHERE id = $1`, id).Scan(&settled)
			if err != nil {
				return err
			}
			if settled {
				return nil
			}
			if polling {
				quiet.Reset(10 * time.Millisecond)
			} else {
				quiet.Reset(2 * time.Second)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
