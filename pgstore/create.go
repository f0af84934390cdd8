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

	"github.com/effectivelabs/durable/internal/dag"
	"github.com/effectivelabs/durable/internal/flow"
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
func (s *Store) CreateRuns(ctx context.Context, p *store.CreateRunsParams) error {
	return classify(s.createRuns(ctx, p))
}

func (s *Store) createRuns(ctx context.Context, p *store.CreateRunsParams) error {
	prep, err := s.prepareCreate(p)
	if err != nil || prep == nil {
		return err
	}
	err = s.createOwnTx(ctx, prep)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" && pgErr.ConstraintName == "runs_shape_id_fkey" {
		// A shape this process believed stored is gone (the schema was
		// recreated): forget what it knew and try again.
		s.mu.Lock()
		clear(s.stored)
		s.mu.Unlock()
		err = s.createOwnTx(ctx, prep)
	}
	return err
}

// CreateRunsTx implements store.TxCreator: it creates the runs inside tx,
// which must be a pgx.Tx, and neither commits nor rolls it back. Runs that
// already exist are reported with ErrRunExists without aborting tx, except
// when a concurrent transaction creates the same run at the same moment.
//
// The caller's transaction may stay open for long, so nothing it does may
// hold a lock that the engines need: the runs' shapes are stored beforehand,
// outside tx (they are immutable, and harmless if tx rolls back), and their
// root tasks wait in the incoming table, without fair-queue ids, until an
// engine promotes them after tx commits (see incoming.go).
func (s *Store) CreateRunsTx(ctx context.Context, tx any, p *store.CreateRunsParams) error {
	return classify(s.createRunsTx(ctx, tx, p))
}

func (s *Store) createRunsTx(ctx context.Context, tx any, p *store.CreateRunsParams) error {
	ptx, ok := tx.(pgx.Tx)
	if !ok || ptx == nil {
		return &TxTypeError{Got: tx}
	}
	prep, err := s.prepareCreate(p)
	if err != nil || prep == nil {
		return err
	}
	if err := s.storeShapes(ctx, prep); err != nil {
		return err
	}
	if _, err := s.create(ctx, ptx, prep, true); err != nil {
		return err
	}
	s.incoming.Store(true)
	return nil
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
	byPtr := make(map[*store.Shape]cached)
	for i := range p.Runs {
		nr := &p.Runs[i]
		if err := dag.CheckNewRun(nr); err != nil {
			return nil, fmt.Errorf("pgstore: run %s: %w", nr.ID, err)
		}
		if err := flow.Check(nr); err != nil {
			return nil, fmt.Errorf("pgstore: run %s: %w", nr.ID, err)
		}
		prep.keyed = prep.keyed || nr.Keys != nil
		sc, ok := byPtr[nr.Shape]
		if !ok {
			id, js, c, err := s.compileShape(nr.Shape)
			if err != nil {
				return nil, fmt.Errorf("pgstore: run %s: %w: %w", nr.ID, store.ErrInvalidRun, err)
			}
			sc = cached{id, c}
			byPtr[nr.Shape] = sc
			if _, ok := prep.js[id]; !ok {
				prep.js[id] = js
				prep.wf[id] = nr.Workflow
			}
		}
		if seen[nr.ID] {
			return nil, fmt.Errorf("pgstore: run %s: %w", nr.ID, store.ErrRunExists)
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

func (s *Store) createOwnTx(ctx context.Context, prep *createPrep) error {
	at := time.Now()
	newShapes, err := s.create(ctx, nil, prep, false)
	if err != nil {
		return err
	}
	s.mu.Lock()
	for _, id := range newShapes {
		s.stored[id] = at
	}
	s.mu.Unlock()
	return nil
}

// create creates the runs. With tx nil it works in a transaction of its own,
// which it commits; otherwise inside tx, the caller's, deferring the
// enqueueing of root tasks (deferred) and leaving shapes and tenants alone.
// It returns the shapes it inserted.
func (s *Store) create(ctx context.Context, tx pgx.Tx, prep *createPrep, deferred bool) ([]uuid.UUID, error) {
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
	var existing []uuid.UUID
	b.Queue(s.q.runsExist, u16(prep.ids)).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id uuid.UUID
			if err := rows.Scan(p16(&id)); err != nil {
				return err
			}
			existing = append(existing, id)
		}
		return rows.Err()
	})
	c := newChange(now)
	c.deferred = deferred
	if !deferred {
		wfs, tenants := make([]string, len(prep.lanes)), make([]string, len(prep.lanes))
		for i, k := range prep.lanes {
			wfs[i], tenants[i] = k.workflow, k.tenant
		}
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
			return nil, fmt.Errorf("pgstore: begin: %w", err)
		}
		defer own.close(ctx)
		q = own
	}
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return nil, s.createError(err)
	}
	if len(existing) > 0 {
		return nil, fmt.Errorf("pgstore: run %s: %w", existing[0], store.ErrRunExists)
	}
	// Start the runs. Fair ids are assigned in run order, each run's tasks
	// in the order the core enqueued them.
	c.Now = now
	c.shapeIDs = make(map[*dag.Run]uuid.UUID, len(prep.p.Runs))
	for i := range prep.p.Runs {
		nr := &prep.p.Runs[i]
		rec := store.Run{ID: nr.ID, Workflow: nr.Workflow, Tenant: nr.Tenant, Input: nr.Input}
		r, fx := flow.Start(rec, prep.shapes[i], nr.Keys, now)
		c.shapeIDs[r] = prep.shapeIDs[i]
		c.load(r, nil)
		c.Add(r, fx)
	}
	if err := s.persist(ctx, q, c, nil, own); err != nil {
		return nil, s.createError(err)
	}
	return sIDs, nil
}

// createError maps database errors of CreateRuns to the store's errors.
func (s *Store) createError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505" && pgErr.ConstraintName == "runs_pkey":
			return fmt.Errorf("pgstore: %s: %w", pgErr.Detail, store.ErrRunExists)
		case pgErr.Code == "2200H": // sequence_generator_limit_exceeded
			return fmt.Errorf("pgstore: %w", store.ErrTooManyTenants)
		}
	}
	return fmt.Errorf("pgstore: create runs: %w", err)
}
