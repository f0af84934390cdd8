package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// A transition call runs in one transaction: it locks and loads the runs it
// touches (load.go), applies the core's transitions to them through a
// dag.Change, and persists that change (write.go): dequeued ready rows,
// lanes and fair ids (lanes.go), tasks, ready rows, events (events.go),
// runs and notifications, then commits. The store decides nothing: what
// changed is what the core's Effects say.

// errRaced reports that a transition lost a race with a concurrent claim:
// a task it cancels was claimed after it was loaded. The transaction is
// rolled back and the call retried.
var errRaced = errors.New("pgstore: a ready task was claimed concurrently")

// maxAttempts bounds the attempts of a transition. The first attempt is
// optimistic; after losing a race, an attempt locks the ready rows of its
// runs before loading their tasks, so that no claim can take them meanwhile,
// and cannot lose again. The bound is a safety net.
const maxAttempts = 3

// retryRaced runs fn again while it loses races with concurrent claims;
// fn's argument tells it to lock the runs' ready rows up front.
func retryRaced(fn func(lockReady bool) error) error {
	for attempt := 1; ; attempt++ {
		err := fn(attempt > 1)
		if !errors.Is(err, errRaced) {
			return err
		}
		if attempt == maxAttempts {
			return durabletype.Transient(fmt.Errorf("pgstore: gave up after %d attempts: %w", attempt, err))
		}
	}
}

// change is a dag.Change with what PostgreSQL needs to write it, one part
// per concern, each kept by the file that uses it: the fair-queue
// placement (lanes.go), the event ids (events.go), admission's state
// (flow.go), the child runs created (create.go), the messages between
// runs (waits.go).
type change struct {
	*dag.Change
	byID map[uuid.UUID]*dag.Run

	// deferred: enqueued tasks go to the incoming table instead of the ready
	// queue, and no fair-queue state is touched (runs created inside a
	// caller's transaction; see incoming.go).
	deferred bool

	notes []string
	// uncounted are the settled runs an action made settle no more (a
	// replay), by the key they were counted under: queueRunUpdates counts
	// them out.
	uncounted map[dag.RunCountKey]int64

	placement
	eventIDs
	admission
	newRuns
	inboxState
}

// addItems makes loaded items available to r's transitions, with the
// events their rows hold.
func (c *change) addItems(r *dag.Run, lts []loadedTask) error {
	tasks := make([]store.Task, len(lts))
	for k := range lts {
		tasks[k] = lts[k].task
		key := itemRef{r.Rec.ID, lts[k].task.Name}
		if _, ok := c.itemCols[key]; !ok {
			ec := lts[k].cols
			c.itemCols[key] = &ec
		}
	}
	if _, err := r.AddItems(tasks); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return nil
}

// drop takes the runs for which gone is true out of the change, with
// their effects and enqueued tasks: runs it was to create that turned out
// to exist.
func (c *change) drop(gone func(r *dag.Run) bool) {
	c.Runs = slices.DeleteFunc(c.Runs, func(r *dag.Run) bool {
		if !gone(r) {
			return false
		}
		delete(c.Effects, r)
		delete(c.byID, r.Rec.ID)
		delete(c.cols, r)
		return true
	})
	c.Enqueued = slices.DeleteFunc(c.Enqueued, func(e dag.TaskAt) bool { return gone(e.R) })
}

func newChange(now time.Time) *change {
	return &change{Change: dag.NewChange(now), byID: make(map[uuid.UUID]*dag.Run),
		eventIDs: eventIDs{cols: make(map[*dag.Run][]eventCols), itemCols: make(map[itemRef]*eventCols)}}
}

// load makes r available to the call's transitions.
func (c *change) load(r *dag.Run, cols []eventCols) {
	c.byID[r.Rec.ID] = r
	c.cols[r] = cols
	if dag.Keyed(r.Shape) {
		if c.before == nil {
			c.before = dag.SlotsBefore{}
		}
		c.before.Note(r)
	}
}

// plan describes one transition call for transition.
type plan struct {
	// now is the transition time; zero means the database's clock, read
	// in the transaction once the runs are locked.
	now time.Time
	// ids are the runs to lock and load, when known up front.
	ids []uuid.UUID
	// apply runs the core's transitions on the loaded runs.
	apply func(c *change) error
	// extra queues statements after the writes, in the same round trip.
	extra func(b *pgx.Batch, c *change)
	// lockReady locks the ready rows of the runs before loading their tasks
	// (after a lost race).
	lockReady bool
	// items are the items to load with the runs.
	items []itemRef
	// records are function bodies (run, body step) whose every record to
	// load with the runs (dag.HasRecords).
	records []itemRef
	// inbox loads the messages pending for the runs, locked
	// (change.inbox): the call applies them.
	inbox bool
	// locks are transaction advisory locks (event keys) taken after the
	// runs' locks, before the messages are read.
	locks []int64
	// settled, when set, collects the settlements of the call (see
	// store.SettledRun): of its transaction once committed, unless omit
	// (FinishTasks reports those per outcome), and of the transitions
	// that apply the messages it left.
	settled *[]store.SettledRun
	omit    bool
}

// transition runs one transition in its own transaction: it locks and loads
// the runs, calls apply, persists the change and commits. It takes two round
// trips (begin+load, writes+commit), three when the change dequeues or
// enqueues (ready rows and lanes are locked first).
func (s *Store) transition(ctx context.Context, p *plan) error {
	at := time.Now()
	c, err := s.transact(ctx, p)
	if err != nil {
		return err
	}
	s.committed(ctx, p, c, at)
	return nil
}

// committed does what follows a transition's commit; at is when its
// transaction began.
func (s *Store) committed(ctx context.Context, p *plan, c *change, at time.Time) {
	if ids := c.newShapes.ids; len(ids) > 0 {
		// The shapes of the child runs it created are stored: later
		// transitions need not insert them again (see shapeKnown).
		s.mu.Lock()
		for _, id := range ids {
			s.stored[id] = at
		}
		s.mu.Unlock()
	}
	if p.settled != nil && !p.omit {
		*p.settled = c.AppendSettled(*p.settled)
	}
	// The messages the transition left for other runs are applied now,
	// once its connection is back in the pool, each run's in a transaction
	// of its own; what fails here is left to the leader (ApplyInbox).
	s.deliver(ctx, p.now, c.inboxRuns, p.settled)
}

// transact runs the transaction of a transition and returns its change.
func (s *Store) transact(ctx context.Context, p *plan) (*change, error) {
	b := &pgx.Batch{}
	var l loader
	l.queue(&s.q, b, p)
	tx, err := s.beginOwn(ctx, b)
	if err != nil {
		return nil, fmt.Errorf("pgstore: begin: %w", err)
	}
	defer tx.close(ctx)
	return s.transactOn(ctx, tx, tx, b, &l, p)
}

// transactOn sends b, the batch that locks and loads the runs (l), on q,
// then applies p and persists the change on q; own, when set, is the
// store's own transaction q, which commits with the writes.
func (s *Store) transactOn(ctx context.Context, q querier, own *ownTx, b *pgx.Batch, l *loader, p *plan) (*change, error) {
	if err := s.sendBatch(ctx, q, b).Close(); err != nil {
		return nil, fmt.Errorf("pgstore: load runs: %w", err)
	}
	now := p.now
	if now.IsZero() {
		// Transition times are read after the runs are locked, so that they
		// never go back along a run's history.
		now = l.clock
	}
	c := newChange(dag.Timestamp(now))
	if err := l.build(ctx, s, q, c); err != nil {
		return nil, err
	}
	if p.inbox {
		c.applyInbox(l.inbox)
	}
	if err := p.apply(c); err != nil {
		return nil, err
	}
	var extra func(b *pgx.Batch)
	if p.extra != nil {
		extra = func(b *pgx.Batch) { p.extra(b, c) }
	}
	if err := s.persist(ctx, q, c, extra, own); err != nil {
		return nil, err
	}
	return c, nil
}
