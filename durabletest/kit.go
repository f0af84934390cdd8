// Package durabletest tests workflows in virtual time, or on PostgreSQL.
//
// Run gives a test an engine on a fresh in-memory store, started inside a
// testing/synctest bubble, in one line: the real engine runs the workflows,
// with its claim loop, timers, retries and leader, but time is virtual, so
// that a 24-hour sleep, a retry backoff or an event wait's timeout passes
// at once, and the test reads the state at exact instants.
//
//	func TestSignup(t *testing.T) {
//		durabletest.Run(t, func(t *testing.T, k *durabletest.Kit) {
//			id := durabletest.Start(k, signup, Signup{Email: "ada@example.com"})
//			k.WaitStep(id, verified, durabletype.TaskWaiting) // the run waits for the event
//			k.SendEvent("verified:ada@example.com", true)
//			res := k.Settle(id) // the 24-hour sleep passes in no time
//			durabletest.RequireCompleted(t, res)
//			durabletest.RequireOutput(t, res, welcome, "sent")
//		})
//	}
//
// Every Kit method that acts (Start, Advance, SendEvent, Signal, ...)
// returns once the engine has done all it can at the current instant, and
// the waiting methods (Settle, WaitStep) let virtual time pass only until
// what they wait for happens. A waiting method fails the test at once,
// describing what the run waits for, when the run can only go on with
// input from outside the engine (an event, a signal) that the test has not
// sent; and after Options.Timeout of virtual time otherwise.
//
// Durable functions (durable.NewFunction) run in the kit the same way:
// Start and Execute take one, its body is the step durable.FuncBody, its
// calls are steps named "name#seq" (StepName), and FuncOutput and
// RequireFuncOutput read what it returned.
//
// # On PostgreSQL
//
// A transactional step (durable.TxStep, durable.DoTx) is declared once,
// with the production type pgx.Tx, and tested with its SQL run for real:
// RunPostgres (or Options.DatabaseURL) runs the kit's engine on pgstore,
// in a fresh schema, with another for the application's tables first on
// the search_path of Kit.Pool, and drops both when the test ends.
//
//	func TestPayment(t *testing.T) {
//		durabletest.RunPostgres(t, func(t *testing.T, k *durabletest.Kit) {
//			k.Pool().Exec(k.Context(), `CREATE TABLE payments (...)`) // or your migrations
//			res := durabletest.Execute(k, checkout, Order{ID: "o-1", Cents: 1250})
//			durabletest.RequireCompleted(t, res)
//			// query payments through k.Pool(): one row, whatever the retries
//		})
//	}
//
// Time is real there, on the database's clock: Advance fails the test,
// Settle and WaitStep wait in real time (Options.Timeout defaults to
// DefaultPostgresTimeout), and the methods that act return once no step
// runs, is ready or is due (Idle). Everything else works as in memory.
//
// The assertions (RequireCompleted, RequireState, RequireOutput, ...) read
// a durable.RunResult, typed through durable.StepRef, and work with any
// engine and store, inside a bubble or not.
//
// The engine is stopped when the test function returns, and its goroutines
// end with it: synctest fails a test that leaves goroutines behind.
package durabletest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/store"
)

// Options configure a Kit. The zero value is valid.
type Options struct {
	// Config configures the kit's engine, as durable.New takes it. Its
	// Logger defaults to the test's log (t.Log), warnings and errors only;
	// its other fields default as for durable.New. Clock must be nil: the
	// bubble's clock is virtual already.
	Config durable.Config
	// Tenant is the tenant of the runs Start triggers and of the events
	// SendEvent sends. Defaults to "tenant".
	Tenant string
	// Timeout is how much virtual time Settle and WaitStep wait at most
	// before they fail the test. Defaults to DefaultTimeout; on
	// PostgreSQL it is real time, and defaults to DefaultPostgresTimeout.
	Timeout time.Duration

	// DatabaseURL, when set, runs the kit's engine on PostgreSQL at that
	// URL (pgstore), in real time, instead of in memory in virtual time:
	// see RunPostgres. The kit migrates a fresh schema of its own for the
	// store, and gives the test another, empty, for the application's
	// tables (Kit.Schema), first on the search_path of the kit's pool
	// (Kit.Pool), so that your SQL's unqualified names find them; it drops
	// both when the test ends. Defaults to "": in memory.
	DatabaseURL string
}

// DefaultTimeout is the Options.Timeout of a zero Options: 30 days of
// virtual time. Virtual time costs real time in the engine's periodic
// work (refreshes, the leader's passes, idle polls): about a tenth of a
// real second per virtual day (BenchmarkVirtualSleep).
const DefaultTimeout = 30 * 24 * time.Hour

// DefaultTenant is the Options.Tenant of a zero Options.
const DefaultTenant = "tenant"

// stopTimeout bounds, in virtual time, the drain of the kit's engine when
// the test function returns: steps still running are then cancelled.
const stopTimeout = time.Minute

// Kit is an engine on an in-memory store inside a synctest bubble, and the
// means to drive it in virtual time; or, from RunPostgres, an engine on
// PostgreSQL, driven in real time. Get one from Run or RunPostgres. Its
// methods must be called from the test's goroutine (they wait with
// synctest.Wait, which one goroutine at a time may call), and report
// failures to the test.
type Kit struct {
	tb      testing.TB
	ctx     context.Context
	engine  *durable.Engine
	store   store.Store // memObserved or pgObserved
	watch   *watch
	tenant  string
	timeout time.Duration
	pg      *pgKit // nil in memory
}

// Run runs fn inside a testing/synctest bubble with a Kit whose engine is
// started, with the default Options. The engine is stopped when fn
// returns. Run must not be called inside a bubble, and fn must not call
// t.Run or t.Parallel (synctest's rules).
func Run(t *testing.T, fn func(t *testing.T, k *Kit)) {
	t.Helper()
	RunOptions(t, Options{}, fn)
}

// RunOptions is Run with options. With Options.DatabaseURL set, the kit
// runs on PostgreSQL, in real time, outside a bubble (see RunPostgres).
func RunOptions(t *testing.T, opts Options, fn func(t *testing.T, k *Kit)) {
	t.Helper()
	if opts.DatabaseURL != "" {
		k := startPostgres(t, opts)
		defer k.stop()
		fn(t, k)
		return
	}
	synctest.Test(t, func(t *testing.T) {
		t.Helper()
		k := start(t, opts)
		defer k.stop()
		fn(t, k)
	})
}

// start builds and starts the kit's engine on a fresh in-memory store,
// failing t if it cannot.
func start(t *testing.T, opts Options) *Kit {
	t.Helper()
	w := newWatch()
	k := newKit(t, opts, DefaultTimeout, &memObserved{Store: memstore.New(), w: w}, w)
	k.launch()
	return k
}

// newKit returns a kit whose engine, on s, is not started yet;
// defaultTimeout is the default of opts.Timeout.
func newKit(t *testing.T, opts Options, defaultTimeout time.Duration, s store.Store, w *watch) *Kit {
	t.Helper()
	if opts.Tenant == "" {
		opts.Tenant = DefaultTenant
	}
	if opts.Timeout == 0 {
		opts.Timeout = defaultTimeout
	}
	if opts.Timeout < 0 {
		t.Fatalf("durabletest: negative Options.Timeout %s", opts.Timeout)
	}
	cfg := opts.Config
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = "durabletest"
	}
	e, err := durable.New(s, cfg)
	if err != nil {
		t.Fatalf("durabletest: %v", err)
	}
	return &Kit{tb: t, ctx: t.Context(), engine: e, store: s, watch: w, tenant: opts.Tenant, timeout: opts.Timeout}
}

// launch starts the kit's engine.
func (k *Kit) launch() {
	k.tb.Helper()
	if err := k.engine.Start(k.ctx); err != nil {
		k.tb.Fatalf("durabletest: starting the engine: %v", err)
	}
	k.idle()
}

// testLogger logs warnings and errors to the test's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// stop stops the engine: running steps are cancelled after stopTimeout of
// virtual time (pgStopTimeout of real time on PostgreSQL). Outcomes the
// engine could not record fail the test.
func (k *Kit) stop() {
	d := stopTimeout
	if k.pg != nil {
		d = pgStopTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := k.engine.Stop(ctx); err != nil {
		if ctx.Err() != nil && !errors.Is(err, durable.ErrNotRecorded) {
			k.tb.Logf("durabletest: steps still running when the test ended were cancelled: %v", err)
			return
		}
		k.tb.Errorf("durabletest: stopping the engine: %v", err)
	}
}

// testWriter writes a log line to the test's log.
type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

var _ io.Writer = testWriter{}

// with returns a copy of k that reports failures to tb (tests of the kit).
func (k *Kit) with(tb testing.TB) *Kit {
	c := *k
	c.tb = tb
	return &c
}

// Engine returns the kit's engine, started on its store: trigger runs,
// read them, cancel or replay them with it as with any engine.
func (k *Kit) Engine() *durable.Engine { return k.engine }

// Store returns the kit's store (in memory, or a *pgstore.Store's on
// PostgreSQL), to start more engines on it (durable.New), as other
// processes would share a database. Changes made through them are seen
// by Settle and WaitStep as well (on PostgreSQL, at the kit's next poll).
func (k *Kit) Store() store.Store { return k.store }

// Tenant returns the tenant of the runs Start triggers (Options.Tenant).
func (k *Kit) Tenant() string { return k.tenant }

// Context returns the test's context, done when the test ends.
func (k *Kit) Context() context.Context { return k.ctx }

// Register registers workflow definitions on the kit's engine (see
// durable.Engine.Register), failing the test on a definition error, and
// returns once the engine's record in the registry of workers says it
// serves them (on PostgreSQL the record is written in the background).
// Start registers the workflow it starts if need be.
func (k *Kit) Register(defs ...durable.Definition) {
	k.tb.Helper()
	if err := k.engine.Register(defs...); err != nil {
		k.tb.Fatalf("durabletest: registering: %v", err)
	}
	if k.pg != nil {
		k.pgServes()
	}
	k.idle()
}

// Idle returns once the engine has done all it can at the current
// instant: every step that can run now has run, every outcome is recorded.
// Virtual time does not move.
//
// On PostgreSQL, where time is real, Idle waits until no step of a run in
// flight runs, is ready or is due, and no call of the engine that may
// change a run is under way; it fails the test after Options.Timeout,
// describing what still runs (a step blocked in its own code keeps the
// engine busy: the kit cannot tell it from one at work).
func (k *Kit) Idle() {
	k.tb.Helper()
	k.idle()
}

// idle is Idle.
func (k *Kit) idle() {
	k.tb.Helper()
	if k.pg == nil {
		synctest.Wait()
		return
	}
	k.pgIdle()
}

// Advance lets d of virtual time pass and returns once the engine has done
// all it can at the new instant. Everything due meanwhile happens at its
// time, as in production: sleeps end, retry backoffs elapse, waits time
// out, schedules fire, the leader rescues the steps of dead workers.
//
// On PostgreSQL Advance fails the test: the database keeps the clock that
// due times are compared with, and it cannot be moved. Wait there with
// Settle or WaitStep (in real time), and test what depends on time with
// the in-memory kit.
func (k *Kit) Advance(d time.Duration) {
	k.tb.Helper()
	if k.pg != nil {
		k.tb.Fatalf("durabletest: Advance(%s): the kit on PostgreSQL runs in real time, on the database's clock, which cannot be moved: wait with Settle or WaitStep, or test timing with the in-memory kit (Run)", d)
	}
	if d < 0 {
		k.tb.Fatalf("durabletest: Advance(%s): time does not go back", d)
	}
	time.Sleep(d)
	synctest.Wait()
}

// Workflow is what Start and Execute start: a *durable.Workflow[I], or a
// durable function (*durable.Function[I, O], which is one).
type Workflow[I any] interface {
	durable.Definition
	// Name returns the workflow's name.
	Name() string
	// RunNoWait starts a run (see durable.Workflow.RunNoWait).
	RunNoWait(ctx context.Context, e *durable.Engine, tenant string, in I, opts ...durable.TriggerOption) (uuid.UUID, error)
}

// Start starts a run of wf (a workflow or a durable function) for the
// kit's tenant with input in, registering wf on the kit's engine first if
// no workflow of its name is registered, and returns the run's ID once the
// engine has done all it can at the current instant (the steps that can
// run now have run). It fails the test if the run cannot be started.
func Start[I any](k *Kit, wf Workflow[I], in I, opts ...durable.TriggerOption) uuid.UUID {
	k.tb.Helper()
	if !k.registered(wf.Name()) {
		k.Register(wf)
	}
	id, err := wf.RunNoWait(k.ctx, k.engine, k.tenant, in, opts...)
	if err != nil {
		k.tb.Fatalf("durabletest: starting a run of %s: %v", wf.Name(), err)
	}
	k.idle()
	return id
}

// Execute starts a run of wf with input in (as Start does) and lets
// virtual time pass until it settles (as Settle does); it returns the
// run's result, whether it completed or not.
func Execute[I any](k *Kit, wf Workflow[I], in I, opts ...durable.TriggerOption) *durable.RunResult {
	k.tb.Helper()
	return k.Settle(Start(k, wf, in, opts...))
}

// registered reports whether a workflow of that name is registered on the
// kit's engine.
func (k *Kit) registered(name string) bool {
	for _, w := range k.engine.Workflows() {
		if w.Name == name {
			return true
		}
	}
	return false
}

// Get returns the current state of a run, failing the test if it cannot.
func (k *Kit) Get(id uuid.UUID) *durable.RunResult {
	k.tb.Helper()
	res, err := k.engine.Get(k.ctx, id)
	if err != nil {
		k.tb.Fatalf("durabletest: %v", err)
	}
	return res
}

// Events returns a run's event log, failing the test if it cannot.
func (k *Kit) Events(id uuid.UUID) []durabletype.Event {
	k.tb.Helper()
	evs, err := k.engine.Events(k.ctx, id)
	if err != nil {
		k.tb.Fatalf("durabletest: %v", err)
	}
	return evs
}

// Child returns the current state of the child run that step, a Child
// step of res's run, started last; it fails the test if the step started
// none.
func (k *Kit) Child(res *durable.RunResult, step Step) *durable.RunResult {
	k.tb.Helper()
	s := stepOf(k.tb, res, step)
	if s.ChildRunID == uuid.Nil {
		k.tb.Fatalf("durabletest: run %s: step %q started no child run (it is %s)", res.ID, s.Name, s.State)
	}
	return k.Get(s.ChildRunID)
}

// SendEvent sends an event with key for the kit's tenant (see
// durable.Engine.SendEvent) and returns how many waiting steps received
// it, once the engine has done all it can at the current instant. A step
// receives it only if it waits for the key now (WaitStep waits for that),
// or begins waiting later and looks back far enough (durable.WithLookback).
func (k *Kit) SendEvent(key string, payload any) int {
	k.tb.Helper()
	n, err := k.engine.SendEvent(k.ctx, k.tenant, key, payload)
	if err != nil {
		k.tb.Fatalf("durabletest: sending event %q: %v", key, err)
	}
	k.idle()
	return n
}

// Signal sends the signal name with payload to run id (see
// durable.Engine.Signal), and returns once the engine has done all it can
// at the current instant.
func (k *Kit) Signal(id uuid.UUID, name string, payload any) {
	k.tb.Helper()
	if err := k.engine.Signal(k.ctx, id, name, payload); err != nil {
		k.tb.Fatalf("durabletest: %v", err)
	}
	k.idle()
}

// Settle lets virtual time pass until run id settles, and returns its
// result (see durable.RunResult.Done), at the instant it settled. It fails
// the test at once if the run cannot settle without input from outside
// the engine (an event or a signal the test has not sent, a workflow no
// engine serves), and after Options.Timeout of virtual time otherwise,
// describing what the run waits for. (A test that sends that input from
// another goroutine of its own, later, waits with the engine's Wait.)
func (k *Kit) Settle(id uuid.UUID) *durable.RunResult {
	k.tb.Helper()
	return k.await(id, "settle", func(res *durable.RunResult) bool { return res.Done() })
}

// WaitStep lets virtual time pass until step of run id is in state, and
// returns it. A state is seen at an instant where the engine is idle: a
// step that passes through a state within one instant (RUNNING, for a step
// whose code does not wait) is not seen in it; on PostgreSQL a state is
// seen when the kit reads it (whenever its engine changed something, and
// every 20ms), so a brief one may be seen or not. WaitStep fails the test if
// the run settles first, at once if the run cannot go on without input
// from outside the engine, and after Options.Timeout of virtual time
// otherwise.
func (k *Kit) WaitStep(id uuid.UUID, step Step, state durabletype.TaskState) *durable.StepResult {
	k.tb.Helper()
	var got *durable.StepResult
	k.await(id, fmt.Sprintf("have step %q %s", step.Name(), state), func(res *durable.RunResult) bool {
		s := stepOf(k.tb, res, step)
		if s.State == state {
			got = s
			return true
		}
		return false
	})
	return got
}

// await lets virtual time pass until done holds for run id, and returns
// its result. It looks again whenever the store may have changed a run
// (watch), so that it sees every instant where done may begin to hold,
// and no other; on PostgreSQL, also every pgPoll.
func (k *Kit) await(id uuid.UUID, what string, done func(*durable.RunResult) bool) *durable.RunResult {
	k.tb.Helper()
	deadline := time.NewTimer(k.timeout)
	defer deadline.Stop()
	var poll <-chan time.Time
	kind := "virtual"
	if k.pg != nil {
		tick := time.NewTicker(pgPoll)
		defer tick.Stop()
		poll, kind = tick.C, "real"
	}
	start := time.Now()
	for {
		if k.pg == nil {
			synctest.Wait() // the engine is idle
			select {
			case <-k.watch.changed:
			default:
			}
		}
		res, ok := k.look(id, what, done)
		if ok {
			return res
		}
		st := k.analyze(res)
		if !st.active && k.pg != nil {
			// On PostgreSQL the engine may be between two calls: the run
			// is stuck only if it still seems so once the engine is quiet.
			if !k.quietNow() {
				st.active = true // judged later
			} else if res, ok = k.look(id, what, done); ok {
				return res
			} else {
				st = k.analyze(res)
			}
		}
		if !st.active {
			k.tb.Fatalf("durabletest: run %s (%s) cannot %s without input from outside the engine:\n%s",
				res.ID, res.Workflow, what, st.describe())
		}
		select {
		case <-k.watch.changed:
		case <-poll:
		case <-deadline.C:
			if k.pg == nil {
				synctest.Wait()
			}
			res = k.Get(id)
			if done(res) {
				return res
			}
			k.tb.Fatalf("durabletest: run %s (%s) did not %s within %s of %s time (Options.Timeout); now:\n%s",
				res.ID, res.Workflow, what, time.Since(start).Round(time.Millisecond), kind, k.analyze(res).describe())
		}
	}
}

// look reads run id: it returns it and true if done holds, fails the test
// if the run settled otherwise, and returns it and false if not.
func (k *Kit) look(id uuid.UUID, what string, done func(*durable.RunResult) bool) (*durable.RunResult, bool) {
	k.tb.Helper()
	res := k.Get(id)
	if done(res) {
		return res, true
	}
	if res.Done() {
		k.tb.Fatalf("durabletest: run %s (%s) settled %s before it could %s", res.ID, res.Workflow, res.Status, what)
	}
	return res, false
}
