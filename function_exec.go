package durable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// The execution of a function's body (function.go): the body runs in the
// goroutine of its claim; each call it makes is answered from its record
// or made and recorded (a checkpoint, which the body waits for); a call
// that must wait ends the execution (a suspension): the body's goroutine
// unwinds, and the outcome says what the body waits for.

// funcRun is one execution of a function's body.
type funcRun struct {
	e   *Engine
	sc  *stepContext
	def *stepDef
	// checkpoint records an outcome of the body's claim through the
	// completer and returns its result.
	checkpoint func(ctx context.Context, o store.Outcome) (store.FinishResult, error)

	mu      sync.Mutex
	records map[int]*store.Task // by call number
	last    int                 // the highest call number recorded; -1: none
	next    int                 // the number of the next call
	// fatal fails the body (a nondeterministic call, a misuse); abort
	// gives its claim back (a checkpoint that could not be recorded), for
	// later when later is set (a run newer code patched).
	fatal, abort error
	later        bool
	susp         *suspension
	running      sync.WaitGroup // steps started with Go
	slots        chan struct{}
	// body is the ID of the body's goroutine: only it makes calls.
	body uint64
}

// goid returns the ID of the calling goroutine, from its stack's first
// line ("goroutine N [...").
func goid() uint64 {
	var buf [40]byte
	b := buf[:goruntime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

// errForeignGoroutine is the misuse of a call made from another goroutine
// than the body's.
var errForeignGoroutine = fmt.Errorf("%w: a function's calls are made from its body's goroutine, in order "+
	"(start steps in parallel with Go, and wait for them with Get, AwaitAll or AwaitFirst)", ErrInvalidOption)

// suspension is what an execution ends with when its body must wait: the
// records to write with it and the calls it waits for.
type suspension struct {
	records []store.Record
	await   []int
	any     bool
}

// unwind is the panic value that ends a body's execution: it suspends, or
// cannot go on (fatal, abort).
type unwind struct{}

// funcContext is the FuncContext of a body: its step context, and its
// execution.
type funcContext struct {
	*stepContext
	fr *funcRun
}

func (c *funcContext) funcRun() *funcRun { return c.fr }

func (c *funcContext) Value(key any) any {
	if _, ok := key.(stepContextKey); ok {
		return c.stepContext
	}
	return c.stepContext.Value(key)
}

// callContext is the Context of a step a function runs (Do, Go): the
// body's, with the call's name and attempt.
type callContext struct {
	*stepContext
	ctx     context.Context
	name    string
	attempt int
}

func (c *callContext) StepName() string            { return c.name }
func (c *callContext) Attempt() int                { return c.attempt }
func (c *callContext) Deadline() (time.Time, bool) { return c.ctx.Deadline() }
func (c *callContext) Done() <-chan struct{}       { return c.ctx.Done() }
func (c *callContext) Err() error                  { return c.ctx.Err() }
func (c *callContext) Value(key any) any           { return c.ctx.Value(key) }

// runFunc runs a claimed function body and returns its outcome.
func (e *Engine) runFunc(sc *stepContext, d *workflowDef, in any, o store.Outcome) store.Outcome {
	s := d.byName[FuncBody]
	if s == nil || s.funcRun == nil {
		return failTerminal(o, fmt.Errorf("%w: workflow %q is not a function in this process's definition", ErrUnknownStep, d.name))
	}
	fr := &funcRun{e: e, sc: sc, def: s, checkpoint: sc.checkpoint, records: map[int]*store.Task{}, last: -1, body: goid()}
	fr.slots = make(chan struct{}, s.funcDef.maxParallel)
	for k := range sc.claim.Records {
		t := &sc.claim.Records[k]
		fr.records[t.Item] = t
		fr.last = max(fr.last, t.Item)
	}
	fc := &funcContext{stepContext: sc, fr: fr}
	var out any
	var err error
	var panicked any
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(unwind); !ok {
					panicked = r
					err = &errPanic{value: r, stack: debug.Stack()}
				}
			}
		}()
		out, err = s.funcRun(fc, in)
	}()
	// Steps started with Go and not awaited finish (and are recorded)
	// before the execution ends.
	fr.running.Wait()
	fr.mu.Lock()
	fatal, abort, susp, later := fr.fatal, fr.abort, fr.susp, fr.later
	fr.mu.Unlock()
	if m := sc.misused(); m != nil && fatal == nil {
		fatal = m
	}
	switch {
	case fatal != nil:
		return failTerminal(o, fatal)
	case abort != nil:
		// Its claim is lost, or a checkpoint could not be recorded: the
		// body runs again (elsewhere, or here later), from its records.
		o.Kind = store.OutcomeRelease
		if later {
			o.Delay = PatchedRetryDelay
		}
		return o
	case susp != nil:
		o.Kind, o.Records, o.Await, o.AwaitAny = store.OutcomeSuspend, susp.records, susp.await, susp.any
		return o
	case panicked != nil:
		return failTerminal(o, err)
	case err != nil:
		if errors.Is(context.Cause(sc), ErrEngineStopped) {
			o.Kind = store.OutcomeRelease
			return o
		}
		return failTerminal(o, err)
	}
	b, err := e.cfg.Codec.Marshal(out)
	if err != nil {
		return failTerminal(o, fmt.Errorf("%w: output of function %q: %w", ErrEncode, d.name, err))
	}
	if err := e.checkOutput(fmt.Sprintf("the output of function %q", d.name), b); err != nil {
		return failTerminal(o, err)
	}
	if _, err := s.decodeOutput(e.cfg.Codec, b); err != nil {
		return failTerminal(o, fmt.Errorf("%w: output of function %q does not decode back into its type: %w", ErrEncode, d.name, err))
	}
	o.Kind, o.Output = store.OutcomeComplete, b
	return o
}

// PatchedRetryDelay is how long a run that newer code patched waits, given
// back by older code (during a rolling deploy), before it is claimed
// again: by then the newer code is more likely to claim it.
const PatchedRetryDelay = 2 * time.Second

// clock returns the time a step's attempt starts, for display: the
// engine's clock, else the process's.
func (fr *funcRun) clock() time.Time {
	if t := fr.e.now(); !t.IsZero() {
		return t
	}
	return time.Now()
}

// stop ends the execution: it unwinds the body's goroutine. Called from
// another goroutine (a misuse), it ends that one, and the body fails.
func (fr *funcRun) stop() {
	if goid() != fr.body {
		fr.mu.Lock()
		if fr.fatal == nil {
			fr.fatal = errForeignGoroutine
		}
		fr.mu.Unlock()
		goruntime.Goexit()
	}
	panic(unwind{})
}

// failWith records a fatal error (the first one wins) and ends the
// execution.
func (fr *funcRun) failWith(err error) {
	fr.mu.Lock()
	if fr.fatal == nil {
		fr.fatal = err
	}
	fr.mu.Unlock()
	fr.stop()
}

// ended unwinds the body if the execution cannot go on (a fatal error, an
// abort or a suspension decided).
func (fr *funcRun) ended() {
	fr.mu.Lock()
	done := fr.fatal != nil || fr.abort != nil || fr.susp != nil
	fr.mu.Unlock()
	if done {
		fr.stop()
	}
}

// call takes the number of the next call, named name, of kind kind, and
// returns its record if it has one. A record of another call there is a
// nondeterministic execution: the body fails with a *NondeterminismError.
func (fr *funcRun) call(name string, kind durabletype.TaskKind) (int, *store.Task) {
	if goid() != fr.body {
		fr.failWith(errForeignGoroutine)
	}
	fr.ended()
	if !dag.ValidName(name) {
		fr.failWith(fmt.Errorf("%w: call name %s: use 1-128 letters, digits or _-.:/ starting with a letter or digit", ErrInvalidName, dag.Quote(name)))
	}
	fr.mu.Lock()
	seq := fr.next
	// A patch marker no code asks for any more is passed over (Patched).
	for r := fr.records[seq]; r != nil && dag.IsPatch(r); r = fr.records[seq] {
		seq++
	}
	passed := seq != fr.next
	fr.next = seq + 1
	rec := fr.records[seq]
	fr.mu.Unlock()
	if seq >= dag.MaxRecords {
		fr.failWith(fmt.Errorf("%w: a function makes at most %d calls per run", ErrInvalidOption, dag.MaxRecords))
	}
	if rec != nil {
		_, _, recName, _ := dag.ParseRecord(rec.Name)
		if (recName != name || rec.Kind != kind) && passed {
			// The history went past a patch marker this code does not ask
			// for, and then on another path: a newer deploy patched the
			// run. This (older) code gives it back to be run by one that
			// knows the patch, rather than fail it.
			fr.e.log.Warn("durable: a run of a function was patched by newer code; giving it back",
				"run_id", fr.sc.claim.RunID.String(), "workflow", fr.sc.claim.Workflow, "call", seq)
			fr.mu.Lock()
			fr.later = true
			fr.mu.Unlock()
			fr.abortWith(fmt.Errorf("durable: call %d is %s in the run's history, patched by newer code", seq, dag.Quote(recName)))
		}
		if recName != name || rec.Kind != kind {
			fr.failWith(&NondeterminismError{Seq: seq,
				Recorded: funcKindName(rec.Kind, false) + " " + dag.Quote(recName),
				Called:   funcKindName(kind, false) + " " + dag.Quote(name)})
		}
	}
	return seq, rec
}

// record records calls while the body runs on (a checkpoint), and keeps
// them as the body's records.
func (fr *funcRun) record(recs ...store.Record) error {
	o := store.Outcome{Task: fr.sc.claim.Ref(), Kind: store.OutcomeCheckpoint, Records: recs}
	res, err := fr.checkpoint(fr.sc, o)
	switch {
	case err == nil && res.Status == store.FinishStale:
		err = ErrClaimLost
	case err == nil && res.Status == store.FinishApplied && fr.sc.Err() == nil:
		// Recorded: the next calls find them.
	case err == nil && res.Status == store.FinishDuplicate:
	case err == nil:
		err = context.Cause(fr.sc)
	}
	if err != nil {
		fr.mu.Lock()
		if fr.abort == nil {
			fr.abort = fmt.Errorf("durable: recording the calls of function %q: %w", fr.sc.claim.Workflow, err)
		}
		fr.mu.Unlock()
		return err
	}
	fr.mu.Lock()
	for k := range recs {
		rec := &recs[k]
		fr.records[rec.Seq] = &store.Task{
			Name: dag.RecordName(FuncBody, rec.Seq, rec.Name), Kind: rec.Kind, State: rec.State,
			Attempt: rec.Attempt, Output: rec.Output, Error: rec.Error, Item: rec.Seq,
		}
		fr.last = max(fr.last, rec.Seq)
	}
	fr.mu.Unlock()
	return nil
}

// suspend ends the execution: the body waits for the calls await names
// (all, or the first when any), recording recs with it.
func (fr *funcRun) suspend(recs []store.Record, await []int, any bool) {
	fr.mu.Lock()
	if fr.susp == nil && fr.fatal == nil && fr.abort == nil {
		fr.susp = &suspension{records: recs, await: await, any: any}
	}
	fr.mu.Unlock()
	fr.stop()
}

// recordedError is the error a call's record keeps.
func recordedError(rec *store.Task) error {
	_, seq, name, _ := dag.ParseRecord(rec.Name)
	return &StepError{Call: name, Seq: seq, Err: rec.Error}
}

// runCall runs the step of call seq, named name, in the body's process:
// attempt after attempt while they fail and its policy allows without a
// wait, recording its result. A failed attempt whose retry is due later is
// returned as the record to write (retry), not written: the caller
// suspends the body with it, or records it. It returns the encoded output,
// or the step's error.
func (fr *funcRun) runCall(seq int, name string, rec *store.Task, cd callDef, run func(ctx Context) (any, error)) (out []byte, err error, retry *store.Record) {
	out, err, attempt, done := resumeCall(rec)
	if done {
		return out, err, nil
	}
	e := fr.e
	for ; ; attempt++ {
		ctx, cancel, span, cc := fr.beginAttempt(cd, name, attempt)
		started := fr.clock()
		var v any
		err = protect(func() error {
			var err error
			v, err = run(cc)
			return err
		})
		if err == nil && errors.Is(context.Cause(ctx), ErrStepTimeout) {
			// Its attempt ran past its timeout: whatever it returned late,
			// it failed, as a DAG step's attempt does.
			err = fmt.Errorf("%w: the attempt ran longer than its timeout of %s", ErrStepTimeout, cd.timeout)
		}
		endCall(span, err)
		cancel()
		if m := fr.sc.misused(); m != nil {
			fr.mu.Lock()
			if fr.fatal == nil {
				fr.fatal = m
			}
			fr.mu.Unlock()
			return nil, m, nil
		}
		if fr.sc.Err() != nil {
			// The body's claim is lost or the engine stops: the call is
			// not recorded, and the body gives its claim back.
			fr.mu.Lock()
			if fr.abort == nil {
				fr.abort = context.Cause(fr.sc)
			}
			fr.mu.Unlock()
			return nil, context.Cause(fr.sc), nil
		}
		r := store.Record{Seq: seq, Name: name, Kind: durabletype.KindStep, Attempt: attempt, Started: started}
		if err == nil {
			b, encErr := e.cfg.Codec.Marshal(v)
			if encErr != nil {
				err = Terminal(fmt.Errorf("%w: output of call %q: %w", ErrEncode, name, encErr))
			} else if lim := e.checkOutput(fmt.Sprintf("the output of call %q", name), b); lim != nil {
				err = Terminal(lim)
			} else {
				r.State, r.Output = durabletype.TaskCompleted, b
				if rerr := fr.record(r); rerr != nil {
					return nil, rerr, nil
				}
				return b, nil, nil
			}
		}
		again, retry, err := fr.failedAttempt(r, err, cd)
		if !again {
			return nil, err, retry
		}
	}
}

// beginAttempt starts attempt attempt of the call name: its context
// (bounded by WithTimeout, cause ErrStepTimeout), its span and the Context
// its step's code receives. The caller ends the span and cancels.
func (fr *funcRun) beginAttempt(cd callDef, name string, attempt int) (context.Context, context.CancelFunc, trace.Span, *callContext) {
	ctx, cancel := context.WithCancel(fr.sc)
	if cd.timeout > 0 {
		ctx, cancel = context.WithTimeoutCause(fr.sc, cd.timeout, ErrStepTimeout)
	}
	ctx, span := fr.e.tel.startCall(ctx, fr.sc.claim, name, attempt)
	return ctx, cancel, span, &callContext{stepContext: fr.sc, ctx: ctx, name: name, attempt: attempt}
}

// failedAttempt decides what follows attempt r.Attempt of a call that
// failed with err: run it again at once (again), wait for its retry (retry:
// the record to write, with the suspension or a checkpoint), or record its
// failure for good and return it as a *StepError.
func (fr *funcRun) failedAttempt(r store.Record, err error, cd callDef) (again bool, retry *store.Record, _ error) {
	r.Error = dag.Text(err.Error())
	if !IsTerminal(err) && r.Attempt < cd.retry.MaxAttempts {
		delay := dag.RetryDelay(cd.retry, r.Attempt, randFloat())
		if delay <= 0 {
			return true, nil, err
		}
		r.State, r.After = durabletype.TaskPending, delay
		return false, &r, err
	}
	r.State = durabletype.TaskFailed
	if rerr := fr.record(r); rerr != nil {
		return false, nil, rerr
	}
	return false, nil, &StepError{Call: r.Name, Seq: r.Seq, Err: r.Error}
}

// resumeCall is how a call of a step starts from its record: a result or a
// failure recorded already (done), or the attempt to run next.
func resumeCall(rec *store.Task) (out []byte, err error, attempt int, done bool) {
	if rec == nil {
		return nil, nil, 1, false
	}
	switch rec.State {
	case durabletype.TaskCompleted:
		return rec.Output, nil, 0, true
	case durabletype.TaskFailed, durabletype.TaskCancelled, durabletype.TaskSkipped:
		return nil, recordedError(rec), 0, true
	}
	return nil, nil, rec.Attempt + 1, false // a retry, due
}
