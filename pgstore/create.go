package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// TxTypeError is returned by CreateRunsTx when its tx is not a pgx.Tx.
type TxTypeError struct {
	// Got is the value passed as the transaction.
	Got any
}

// Error implements error.
func (e *TxTypeError) Error() string {
	return fmt.Sprintf("pgstore: CreateRunsTx needs a pgx.Tx, got %T", e.Got)
}

// CreateRuns implements store.Store.
func (s *Store) CreateRuns(ctx context.Context, p *store.CreateRunsParams) (*store.CreateRunsResult, error) {
	res, err := s.createRuns(ctx, p)
	return res, classify(err)
}

func (s *Store) createRuns(ctx context.Context, p *store.CreateRunsParams) (*store.CreateRunsResult, error) {
	prep, err := s.prepareCreate(p)
	if err != nil || prep == nil {
		return &store.CreateRunsResult{}, err
	}
	for attempt := 0; ; attempt++ {
		res, err := s.createOwnTx(ctx, prep)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "23503" && pgErr.ConstraintName == "runs_shape_id_fkey" && attempt == 0:
			// A shape this process believed stored is gone (the schema was
			// recreated): forget what it knew and try again.
			s.mu.Lock()
			clear(s.stored)
			s.mu.Unlock()
		case errors.As(err, &pgErr) && pgErr.Code == "23505" && attempt < 3 &&
			(pgErr.ConstraintName == "runs_idem_key_idx" || isRunIDTaken(pgErr)):
			// Another transaction created one of these runs (its key or
			// ID) after we looked: look again, and it is a duplicate.
		default:
			return res, err
		}
	}
}

// CreateRunsTx implements store.TxCreator: it creates the runs inside tx,
// which must be a pgx.Tx, and neither commits nor rolls it back. A run that
// duplicates a recorded one is reported as such, and one whose ID is taken
// by another workflow or tenant with ErrRunExists, without aborting tx; a
// run that a concurrent transaction creates at the same moment (the same
// key or ID) is waited for and, if that transaction commits, reported as a
// duplicate.
//
// The caller's transaction may stay open for long, so nothing it does may
// hold a lock that the engines need: the runs' shapes are stored beforehand,
// outside tx (they are immutable, and harmless if tx rolls back), and their
// root tasks wait in the incoming table, without fair-queue ids, until an
// engine promotes them after tx commits (see incoming.go).
func (s *Store) CreateRunsTx(ctx context.Context, tx any, p *store.CreateRunsParams) (*store.CreateRunsResult, error) {
	res, err := s.createRunsTx(ctx, tx, p)
	return res, classify(err)
}

func (s *Store) createRunsTx(ctx context.Context, tx any, p *store.CreateRunsParams) (*store.CreateRunsResult, error) {
	ptx, ok := tx.(pgx.Tx)
	if !ok || ptx == nil {
		return nil, &TxTypeError{Got: tx}
	}
	prep, err := s.prepareCreate(p)
	if err != nil || prep == nil {
		return &store.CreateRunsResult{}, err
	}
	if err := s.storeShapes(ctx, prep); err != nil {
		return nil, err
	}
	res, _, err := s.create(ctx, ptx, prep, true)
	if err != nil {
		return nil, err
	}
	s.incoming.Store(true)
	return res, nil
}

// storeShapes inserts the shapes of prep that this process has not stored
// yet, in a statement of their own.
func (s *Store) storeShapes(ctx context.Context, prep *createPrep) error {
	var ids []uuid.UUID
	var wfs, jss []string
	s.mu.Lock()
	for id, js := range prep.js {
		if !s.shapeKnown(id) {
			ids = append(ids, id)
			wfs = append(wfs, prep.wf[id])
			jss = append(jss, string(js))
		}
	}
	s.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	at := time.Now()
	if _, err := s.pool.Exec(ctx, s.q.insertShapes, u16(ids), wfs, jss); err != nil {
		return fmt.Errorf("pgstore: store shapes: %w", err)
	}
	s.mu.Lock()
	for _, id := range ids {
		s.stored[id] = at
	}
	s.mu.Unlock()
	return nil
}

// createPrep is a validated CreateRuns call.
type createPrep struct {
	p        *store.CreateRunsParams
	shapes   []*dag.Compiled
	shapeIDs []uuid.UUID
	js       map[uuid.UUID][]byte
	wf       map[uuid.UUID]string
	ids      []uuid.UUID
	tenants  []string  // sorted, distinct
	lanes    []laneKey // sorted, distinct
	// keyed: some run has keys, so admission locks its counters before the
	// lanes (persist locks the lanes then, not the first batch).
	keyed bool
}

func (s *Store) prepareCreate(p *store.CreateRunsParams) (*createPrep, error) {
	if len(p.Runs) == 0 {
		return nil, nil
	}
	prep := &createPrep{
		p:        p,
		shapes:   make([]*dag.Compiled, len(p.Runs)),
		shapeIDs: make([]uuid.UUID, len(p.Runs)),
		js:       make(map[uuid.UUID][]byte),
		wf:       make(map[uuid.UUID]string),
		ids:      make([]uuid.UUID, len(p.Runs)),
	}
	seen := make(map[uuid.UUID]bool, len(p.Runs))
	type cached struct {
		id uuid.UUID
		c  *dag.Compiled
	}
	byPtr := make(map[*durabletype.Shape]cached)
	for i := range p.Runs {
		nr := &p.Runs[i]
		if err := dag.CheckNewRun(nr); err != nil {
			return nil, fmt.Errorf("pgstore: run %s: %w", nr.ID, err)
		}
		if err := dag.CheckKeys(nr); err != nil {
			return nil, fmt.Errorf("pgstore: run %s: %w", nr.ID, err)
		}
		prep.keyed = prep.keyed || nr.Keys != nil
		sc, ok := byPtr[nr.Shape]
		if !ok {
			id, js, c, err := s.compileShape(nr.Shape)
			if err != nil {
				return nil, fmt.Errorf("pgstore: run %s: %w: %w", nr.ID, durabletype.ErrInvalidRun, err)
			}
			sc = cached{id, c}
			byPtr[nr.Shape] = sc
			if _, ok := prep.js[id]; !ok {
				prep.js[id] = js
				prep.wf[id] = nr.Workflow
			}
		}
		seen[nr.ID] = true
		prep.shapes[i], prep.shapeIDs[i], prep.ids[i] = sc.c, sc.id, nr.ID
		prep.tenants = append(prep.tenants, nr.Tenant)
		prep.lanes = append(prep.lanes, laneKey{nr.Workflow, nr.Tenant})
	}
	slices.Sort(prep.tenants)
	prep.tenants = slices.Compact(prep.tenants)
	prep.lanes = sortedLanes(prep.lanes)
	return prep, nil
}

func (s *Store) createOwnTx(ctx context.Context, prep *createPrep) (*store.CreateRunsResult, error) {
	at := time.Now()
	res, newShapes, err := s.create(ctx, nil, prep, false)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	for _, id := range newShapes {
		s.stored[id] = at
	}
	s.mu.Unlock()
	return res, nil
}

// recordedRuns are the runs found recorded under the IDs and idempotency
// keys of runs to create.
type recordedRuns struct {
	byID  map[uuid.UUID][2]string // workflow, tenant
	byKey map[dag.IdemKey]uuid.UUID
}

// queueRecorded queues the reads of the runs recorded under the IDs and
// idempotency keys of runs; the result fills in when b is sent.
func (s *Store) queueRecorded(b *pgx.Batch, runs []store.NewRun) *recordedRuns {
	rec := &recordedRuns{byID: map[uuid.UUID][2]string{}, byKey: map[dag.IdemKey]uuid.UUID{}}
	ids := make([]uuid.UUID, len(runs))
	var wfs, tenants, keys []string
	for i := range runs {
		ids[i] = runs[i].ID
		if k, ok := dag.KeyOf(&runs[i]); ok {
			wfs, tenants, keys = append(wfs, k.Workflow), append(tenants, k.Tenant), append(keys, k.Key)
		}
	}
	b.Queue(s.q.runsExist, u16(ids)).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			var wt [2]string
			if err := rows.Scan(p16(&id), &wt[0], &wt[1]); err != nil {
				return err
			}
			rec.byID[id] = wt
		}
		return rows.Err()
	})
	if len(keys) > 0 {
		b.Queue(s.q.keysExist, wfs, tenants, keys).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id uuid.UUID
				var k dag.IdemKey
				if err := rows.Scan(p16(&id), &k.Workflow, &k.Tenant, &k.Key); err != nil {
					return err
				}
				rec.byKey[k] = id
			}
			return rows.Err()
		})
	}
	return rec
}

// dedupe applies dag.Dedupe to the runs found recorded.
func (rec *recordedRuns) dedupe(runs []store.NewRun) (*store.CreateRunsResult, error) {
	res, err := dag.Dedupe(runs, func(id uuid.UUID) (string, string, bool) {
		wt, ok := rec.byID[id]
		return wt[0], wt[1], ok
	}, func(k dag.IdemKey) (uuid.UUID, bool) {
		id, ok := rec.byKey[k]
		return id, ok
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	return res, nil
}

// create creates the runs. With tx nil it works in a transaction of its own,
// which it commits; otherwise inside tx, the caller's, deferring the
// enqueueing of root tasks (deferred) and leaving shapes and tenants alone.
// It returns what it did with each run and the shapes it inserted.
func (s *Store) create(ctx context.Context, tx pgx.Tx, prep *createPrep, deferred bool) (*store.CreateRunsResult, []uuid.UUID, error) {
	b := &pgx.Batch{}
	now := nowOf(prep.p.Now)
	if now.IsZero() {
		b.Queue(s.q.now).QueryRow(func(row pgx.Row) error { return row.Scan(&now) })
	}

	// Shapes not known to be stored.
	var sIDs []uuid.UUID
	var sWfs, sJS []string
	s.mu.Lock()
	for id, js := range prep.js {
		if !deferred && !s.shapeKnown(id) {
			sIDs = append(sIDs, id)
			sWfs = append(sWfs, prep.wf[id])
			sJS = append(sJS, string(js))
		}
	}
	s.mu.Unlock()
	if len(sIDs) > 0 {
		b.Queue(s.q.insertShapes, u16(sIDs), sWfs, sJS)
	}
	rec := s.queueRecorded(b, prep.p.Runs)
	c := newChange(now)
	c.deferred = deferred
	if !deferred {
		wfs, tenants := make([]string, len(prep.lanes)), make([]string, len(prep.lanes))
		for i, k := range prep.lanes {
			wfs[i], tenants[i] = k.workflow, k.tenant
		}
		// New tenants get groups unless a run ID of the call is taken (a
		// duplicate, or a conflict that fails the call); with a duplicate,
		// the lanes still missing are created below, as memstore does.
		b.Queue(s.q.ensureTenants, prep.tenants, u16(prep.ids))
		b.Queue(s.q.ensureLanes, wfs, tenants)
		// Lock the batch's lanes (in order) and read their frontiers in the
		// same round trip; the fair ids are assigned once the runs have
		// started.
		if !prep.keyed {
			c.queueLaneLock(&s.q, b, prep.lanes)
		}
	}
	b.Queue(s.q.eventBlock).QueryRow(func(row pgx.Row) error {
		var block int64
		var clock time.Time
		if err := row.Scan(&block, &clock); err != nil {
			return err
		}
		c.eventBase = block * eventBlockSize
		return nil
	})

	var q querier = tx
	var own *ownTx
	if tx == nil {
		var err error
		if own, err = s.beginOwn(ctx, b); err != nil {
			return nil, nil, fmt.Errorf("pgstore: begin: %w", err)
		}
		defer own.close(ctx)
		q = own
	}
	if err := s.sendBatch(ctx, q, b).Close(); err != nil {
		return nil, nil, s.createError(err)
	}
	res, err := rec.dedupe(prep.p.Runs)
	if err != nil {
		return nil, nil, err
	}
	if !deferred && len(rec.byID) > 0 {
		// A duplicate ID held back the tenants' groups: the lanes of the
		// runs to create get theirs now.
		var keys []laneKey
		for i := range prep.p.Runs {
			if nr := &prep.p.Runs[i]; !res.Runs[i].Duplicate {
				keys = append(keys, laneKey{nr.Workflow, nr.Tenant})
			}
		}
		keys = sortedLanes(keys)
		if missing := c.missingLanes(keys); len(missing) > 0 {
			if err := s.ensureLanes(ctx, q, c, keys, missing); err != nil {
				return nil, nil, err
			}
		}
	}
	// Start the runs. Fair ids are assigned in run order, each run's tasks
	// in the order the core enqueued them.
	c.Now = now
	c.shapeIDs = make(map[uuid.UUID]uuid.UUID, len(prep.p.Runs))
	for i := range prep.p.Runs {
		if res.Runs[i].Duplicate {
			continue
		}
		nr := &prep.p.Runs[i]
		startAt, _ := dag.Times(nr, now)
		r, fx := dag.StartKeyed(dag.NewRecord(nr, prep.shapes[i], now), prep.shapes[i], nr.Keys, now, startAt)
		c.shapeIDs[r.Rec.ID] = prep.shapeIDs[i]
		c.load(r, nil)
		c.Add(r, fx)
	}
	if deferred {
		dag.DeferKeyed(c.Change)
	}
	if len(c.Runs) == 0 {
		if own != nil {
			if err := own.send(ctx, &pgx.Batch{}, true); err != nil {
				return nil, nil, s.createError(err)
			}
		}
		return res, sIDs, nil
	}
	if deferred {
		// Inside the caller's transaction a run created concurrently by
		// another transaction must not abort it: the runs go first, skipping
		// those, which are then duplicates (or conflicts) as found now.
		if err := s.insertNewRuns(ctx, q, c, res, prep); err != nil {
			return nil, nil, err
		}
		if len(c.Runs) == 0 {
			return res, sIDs, nil
		}
	}
	if err := s.persist(ctx, q, c, nil, own); err != nil {
		return nil, nil, s.createError(err)
	}
	return res, sIDs, nil
}

// insertNewRuns inserts the runs of c, skipping those whose key or ID a
// concurrent transaction took (it waits for that transaction to end).
// Those are taken out of c and reported as duplicates, or fail the call
// with ErrRunExists when the ID is another workflow's or tenant's; the rest
// of c is marked as inserted.
func (s *Store) insertNewRuns(ctx context.Context, q querier, c *change, res *store.CreateRunsResult, prep *createPrep) error {
	b := &pgx.Batch{}
	inserted := map[uuid.UUID]bool{}
	b.Queue(s.q.skipTakenKeys, "on")
	c.queueNewRunsWith(&s.q, true, b).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			if err := rows.Scan(p16(&id)); err != nil {
				return err
			}
			inserted[id] = true
		}
		return rows.Err()
	})
	b.Queue(s.q.skipTakenKeys, "off")
	if err := s.sendBatch(ctx, q, b).Close(); err != nil {
		return s.createError(err)
	}
	c.runsInserted = true
	if len(inserted) == len(c.Runs) {
		return nil
	}
	// Look again: the other transactions committed (or we would have
	// inserted), so their runs are visible to a new statement.
	var skipped []store.NewRun
	var at []int
	for i := range prep.p.Runs {
		if !res.Runs[i].Duplicate && !inserted[prep.p.Runs[i].ID] {
			skipped = append(skipped, prep.p.Runs[i])
			at = append(at, i)
		}
	}
	b = &pgx.Batch{}
	queueReleaseKeys(&s.q, b, skipped)
	found := s.queueRecorded(b, skipped)
	if err := s.sendBatch(ctx, q, b).Close(); err != nil {
		return s.createError(err)
	}
	again, err := found.dedupe(skipped)
	if err != nil {
		return err
	}
	for k, cr := range again.Runs {
		if !cr.Duplicate { // neither the ID nor the key was taken: cannot be
			return fmt.Errorf("pgstore: run %s was neither created nor found", cr.ID)
		}
		res.Runs[at[k]] = cr
	}
	c.drop(func(r *dag.Run) bool { return !inserted[r.Rec.ID] })
	return nil
}

// queueReleaseKeys queues the release of the keys that the runs skipped
// took on their way in: the trigger takes a run's key before the insert
// meets its ID, which a transaction that committed meanwhile holds, and
// ON CONFLICT then skips the run but not the key (releaseSkippedKeys).
func queueReleaseKeys(q *queries, b *pgx.Batch, skipped []store.NewRun) {
	var ids [][16]byte
	var wfs, tenants, keys []string
	for _, r := range skipped {
		if r.IdempotencyKey != "" {
			ids, wfs, tenants, keys = append(ids, r.ID), append(wfs, r.Workflow), append(tenants, r.Tenant), append(keys, r.IdempotencyKey)
		}
	}
	if len(ids) > 0 {
		b.Queue(q.releaseSkippedKeys, ids, wfs, tenants, keys)
	}
}

// createError maps database errors of CreateRuns to the store's errors.
func (s *Store) createError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case isRunIDTaken(pgErr):
			return fmt.Errorf("pgstore: %s: %w", pgErr.Detail, durabletype.ErrRunExists)
		case pgErr.Code == "2200H": // sequence_generator_limit_exceeded
			return fmt.Errorf("pgstore: %w", durabletype.ErrTooManyTenants)
		}
	}
	return fmt.Errorf("pgstore: create runs: %w", err)
}

// newRuns is a change's child runs created: the shape of each by run ID
// (shapeIDs), the shapes the store does not know yet, inserted with its
// writes (newShapes), and whether the new runs are inserted already
// (runsInserted; see insertNewRuns).
type newRuns struct {
	shapeIDs     map[uuid.UUID]uuid.UUID
	newShapes    shapeRows
	runsInserted bool
}

// NewRun implements dag.Tx: the child run's shape, stored with the call's
// writes if the store does not know it yet.
func (t *pgTx) NewRun(_ context.Context, nr *store.NewRun, _ time.Time) (*dag.Compiled, error) {
	s, c := t.s, t.c
	id, js, compiled, err := s.compileShape(nr.Shape)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", durabletype.ErrInvalidRun, err)
	}
	s.mu.Lock()
	known := s.shapeKnown(id)
	s.mu.Unlock()
	if ns := &c.newShapes; !known && !slices.Contains(ns.ids, id) {
		ns.ids, ns.wfs, ns.jss = append(ns.ids, id), append(ns.wfs, nr.Workflow), append(ns.jss, string(js))
	}
	if c.shapeIDs == nil {
		c.shapeIDs = map[uuid.UUID]uuid.UUID{}
	}
	c.shapeIDs[nr.ID] = id
	return compiled, nil
}

// shapeRows are shapes to insert.
type shapeRows struct {
	ids      []uuid.UUID
	wfs, jss []string
}
