package durable

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// The calls of a durable function (function.go). Each takes the body's
// FuncContext and a name, which the run's history records: a name may
// repeat (a loop calls the same step again), the history tells the calls
// apart by their order.

// runOf returns the execution ctx belongs to; it panics, as a misuse of
// the API, outside a function's body.
func runOf(ctx FuncContext) *funcRun {
	if ctx == nil {
		panic("durable: a function's call needs the body's FuncContext, got nil")
	}
	return ctx.funcRun()
}

// Do runs fn as a step of the function, once: its result is recorded, and
// when the function runs again Do returns the recorded result without
// running fn. fn runs in the body's process, at once; it runs at least once
// (again when its worker dies before the result is recorded). Options:
// WithRetry (a failed attempt is retried after a durable backoff: the
// function waits, holding nothing, and runs again when it is due) and
// WithTimeout. A step that failed for good returns a *StepError, recorded
// like a result: the function decides what follows.
func Do[O any](ctx FuncContext, name string, fn func(ctx Context) (O, error), opts ...StepOption) (O, error) {
	var zero O
	fr := runOf(ctx)
	cd := fr.options(name, durabletype.KindStep, opts)
	seq, rec := fr.call(name, durabletype.KindStep)
	if fn == nil {
		fr.failWith(fmt.Errorf("%w: call %q: nil step function", ErrNilFunc, name))
	}
	if due := dag.RetryDue(rec); !due.IsZero() && due.After(time.Now()) {
		fr.suspend(nil, []int{seq}, false) // woken early: its retry is not due
	}
	b, err, retry := fr.runCall(seq, name, rec, cd, func(c Context) (any, error) { return fn(c) })
	if retry != nil {
		fr.suspend([]store.Record{*retry}, []int{seq}, false)
	}
	fr.ended()
	if err != nil {
		return zero, err
	}
	return decodeCall[O](fr, name, b)
}

// decodeCall decodes a call's recorded output; one that does not decode
// into O fails the function (its code changed the type under a run).
func decodeCall[O any](fr *funcRun, name string, b []byte) (O, error) {
	var out O
	if err := fr.e.cfg.Codec.Unmarshal(b, &out); err != nil {
		fr.failWith(fmt.Errorf("%w: the recorded result of call %q does not decode into %v: %w", ErrDecode, name, reflect.TypeFor[O](), err))
	}
	return out, nil
}

// options reads a call's options; a misuse fails the function.
func (fr *funcRun) options(name string, kind durabletype.TaskKind, opts []StepOption) callDef {
	cd, err := callOptions(name, kind, opts)
	if err != nil {
		fr.failWith(err)
	}
	return cd
}

// DoTx is Do for a step whose fn also receives tx, the store's transaction
// that records its result (as TxStep does for a DAG's step): what fn
// writes through tx and the result commit together, or neither does. T
// is the store's transaction type: declare it as pgx.Tx, pgstore's, and
// test the call's SQL with durabletest.RunPostgres (in memory the
// transaction is a *memstore.Tx; a step whose T is not the store's fails
// with a *TxTypeError).
func DoTx[O, T any](ctx FuncContext, name string, fn func(ctx Context, tx T) (O, error), opts ...StepOption) (O, error) {
	var zero O
	fr := runOf(ctx)
	cd := fr.options(name, durabletype.KindStep, opts)
	seq, rec := fr.call(name, durabletype.KindStep)
	if fn == nil {
		fr.failWith(fmt.Errorf("%w: call %q: nil step function", ErrNilFunc, name))
	}
	ts, ok := fr.e.store.(store.TxFinisher)
	if !ok {
		fr.failWith(fmt.Errorf("%w: call %q is a DoTx, and the store (%T) cannot record a result in the step's transaction", ErrTxUnsupported, name, fr.e.store))
	}
	if due := dag.RetryDue(rec); !due.IsZero() && due.After(time.Now()) {
		fr.suspend(nil, []int{seq}, false)
	}
	b, err, retry := fr.runTxCall(ts, seq, name, rec, cd, func(c Context, tx any) (any, error) {
		t, ok := tx.(T)
		if !ok {
			return nil, Terminal(&TxTypeError{Step: name, Want: reflect.TypeFor[T](), Got: reflect.TypeOf(tx)})
		}
		return fn(c, t)
	})
	if retry != nil {
		fr.suspend([]store.Record{*retry}, []int{seq}, false)
	}
	fr.ended()
	if err != nil {
		return zero, err
	}
	return decodeCall[O](fr, name, b)
}

// runTxCall is runCall for DoTx: each attempt runs in the store's
// transaction, which records the step's result when it succeeds.
func (fr *funcRun) runTxCall(ts store.TxFinisher, seq int, name string, rec *store.Task, cd callDef, run func(ctx Context, tx any) (any, error)) ([]byte, error, *store.Record) {
	out, err, attempt, done := resumeCall(rec)
	if done {
		return out, err, nil
	}
	e := fr.e
	for ; ; attempt++ {
		ctx, cancel, span, cc := fr.beginAttempt(cd, name, attempt)
		started := fr.clock()
		var stepErr error
		var out []byte
		r := store.Record{Seq: seq, Name: name, Kind: durabletype.KindStep, Attempt: attempt, Started: started}
		res, recorded, err := ts.FinishTx(ctx, &store.FinishTxParams{Now: e.now()}, func(_ context.Context, tx any) (store.Outcome, bool) {
			var v any
			stepErr = protect(func() error {
				var err error
				v, err = run(cc, tx)
				return err
			})
			if stepErr == nil && errors.Is(context.Cause(ctx), ErrStepTimeout) {
				// Past its timeout: its writes roll back, as its attempt fails.
				stepErr = fmt.Errorf("%w: the attempt ran longer than its timeout of %s", ErrStepTimeout, cd.timeout)
			}
			if stepErr == nil {
				b, encErr := e.cfg.Codec.Marshal(v)
				switch {
				case encErr != nil:
					stepErr = Terminal(fmt.Errorf("%w: output of call %q: %w", ErrEncode, name, encErr))
				default:
					if lim := e.checkOutput(fmt.Sprintf("the output of call %q", name), b); lim != nil {
						stepErr = Terminal(lim)
					} else {
						out = b
					}
				}
			}
			if stepErr != nil {
				return store.Outcome{}, false
			}
			r.State, r.Output = durabletype.TaskCompleted, out
			return store.Outcome{Task: fr.sc.claim.Ref(), Kind: store.OutcomeCheckpoint, Records: []store.Record{r}}, true
		})
		endCall(span, cmp.Or(stepErr, err))
		cancel()
		if m := fr.sc.misused(); m != nil {
			fr.failWith(m)
		}
		switch {
		case err != nil && stepErr == nil:
			// The transaction's fate may be unknown: the body gives its
			// claim back and runs again, finding the record if it
			// committed.
			fr.abortWith(fmt.Errorf("durable: call %q: the step's transaction: %w", name, err))
			return nil, err, nil
		case recorded && res.Status == store.FinishApplied:
			fr.keep(r)
			return out, nil, nil
		case recorded:
			fr.abortWith(fmt.Errorf("durable: call %q: %w", name, ErrClaimLost))
			return nil, ErrClaimLost, nil
		}
		if fr.sc.Err() != nil {
			fr.abortWith(context.Cause(fr.sc))
			return nil, context.Cause(fr.sc), nil
		}
		again, retry, err := fr.failedAttempt(r, stepErr, cd)
		if !again {
			return nil, err, retry
		}
	}
}

// abortWith gives the body's claim back (the first reason wins) and ends
// the execution.
func (fr *funcRun) abortWith(err error) {
	fr.mu.Lock()
	if fr.abort == nil {
		fr.abort = err
	}
	fr.mu.Unlock()
	fr.stop()
}

// keep keeps a call the store recorded as one of the body's records.
func (fr *funcRun) keep(rec store.Record) {
	fr.mu.Lock()
	fr.records[rec.Seq] = &store.Task{
		Name: dag.RecordName(FuncBody, rec.Seq, rec.Name), Kind: rec.Kind, State: rec.State,
		Attempt: rec.Attempt, Output: rec.Output, Error: rec.Error, Item: rec.Seq,
	}
	fr.last = max(fr.last, rec.Seq)
	fr.mu.Unlock()
}

// SleepFor makes the function sleep durably for d: it holds nothing while
// it sleeps, and runs again once d has passed (d must be positive).
func SleepFor(ctx FuncContext, name string, d time.Duration) {
	fr := runOf(ctx)
	seq, rec := fr.call(name, durabletype.KindSleep)
	if d <= 0 {
		fr.failWith(fmt.Errorf("%w: SleepFor(%q, %s): the duration must be positive", ErrInvalidSleep, name, d))
	}
	switch {
	case rec == nil:
		fr.suspend([]store.Record{{Seq: seq, Name: name, Kind: durabletype.KindSleep, After: d}}, []int{seq}, false)
	case rec.State == durabletype.TaskSleeping:
		fr.suspend(nil, []int{seq}, false)
	}
}

// AwaitEvent waits durably for the event with key key sent to the run's
// tenant (Engine.SendEvent), and returns its payload decoded into T; the
// function holds nothing while it waits. WithWaitTimeout bounds the wait
// (past it AwaitEvent returns a *StepError matching ErrWaitTimeout);
// WithLookback delivers an event sent at most that long before the wait
// began.
func AwaitEvent[T any](ctx FuncContext, name, key string, opts ...StepOption) (T, error) {
	return await[T](ctx, name, key, false, opts)
}

// AwaitSignal waits durably for the signal named signal sent to this run
// (Engine.Signal), and returns its payload decoded into T. WithWaitTimeout
// bounds the wait. Signals are kept with their run: one sent before the
// wait begins is received at once.
func AwaitSignal[T any](ctx FuncContext, name, signal string, opts ...StepOption) (T, error) {
	return await[T](ctx, name, signal, true, opts)
}

func await[T any](ctx FuncContext, name, key string, signal bool, opts []StepOption) (T, error) {
	var zero T
	fr := runOf(ctx)
	cd := fr.options(name, durabletype.KindEvent, opts)
	seq, rec := fr.call(name, durabletype.KindEvent)
	if signal && cd.wait.lookback != 0 {
		fr.failWith(fmt.Errorf("%w: call %q: WithLookback does not apply to a signal: signals are kept with their run", ErrInvalidOption, name))
	}
	if !dag.ValidEventKey(key) {
		what := "event key"
		if signal {
			what = "signal name"
		}
		fr.failWith(fmt.Errorf("%w: call %q: %s %s: use 1-%d bytes of UTF-8 without control characters",
			durabletype.ErrInvalidEvent, name, what, dag.Quote(key), dag.MaxEventKeyLen))
	}
	switch {
	case rec == nil:
		r := store.Record{Seq: seq, Name: name, Kind: durabletype.KindEvent, Key: key, Signal: signal,
			Timeout: cd.wait.timeout, Lookback: cd.wait.lookback}
		if jsonCodec(fr.e.cfg.Codec) {
			// A payload that does not fit T is refused, and the wait goes on.
			if p := describeJSON(reflect.TypeFor[T]()); p.Type != durabletype.TypeAny {
				r.Payload = p
			}
		}
		fr.suspend([]store.Record{r}, []int{seq}, false)
	case rec.State == durabletype.TaskWaiting:
		fr.suspend(nil, []int{seq}, false)
	case rec.State != durabletype.TaskCompleted:
		return zero, recordedError(rec)
	}
	var out T
	if err := fr.e.cfg.Codec.Unmarshal(rec.Output, &out); err != nil {
		return zero, fmt.Errorf("%w: the payload received by call %q does not decode into %v: %w", ErrDecode, name, reflect.TypeFor[T](), err)
	}
	return out, nil
}

// Patched reports whether this run of the function takes the code path
// marked name, for changing a function while runs of it are in flight: a
// run that reaches the marker for the first time records it and takes the
// new path (true); a run whose history went past this point before the
// marker existed takes the old one (false), and so does every later
// execution of it. Once no run of the old code is left, the Patched call
// and the old path can go; a recorded marker no code asks for is passed
// over.
func Patched(ctx FuncContext, name string) bool {
	fr := runOf(ctx)
	fr.ended()
	if !dag.ValidName(name) {
		fr.failWith(fmt.Errorf("%w: patch name %s", ErrInvalidName, dag.Quote(name)))
	}
	fr.mu.Lock()
	seq, rec, last := fr.next, fr.records[fr.next], fr.last
	if rec != nil && dag.IsPatch(rec) {
		_, _, recName, _ := dag.ParseRecord(rec.Name)
		if recName == name {
			fr.next++
			fr.mu.Unlock()
			return true
		}
	}
	fr.mu.Unlock()
	if rec != nil || seq <= last {
		return false // the history went on without the marker: the old path
	}
	fr.mu.Lock()
	fr.next++
	fr.mu.Unlock()
	if err := fr.record(store.Record{Seq: seq, Name: name, Kind: durabletype.KindStep, State: durabletype.TaskCompleted,
		Patch: true, Output: []byte("true")}); err != nil {
		fr.stop()
	}
	return true
}

// Awaitable is a call whose result may come later: a *Future.
type Awaitable interface {
	state() *futureState
}

// Future is the result to come of a call started with Go, StartChild or
// StartWorkflow. Get waits for it; AwaitAll and AwaitFirst wait for
// several.
type Future[O any] struct {
	st *futureState
}

// futureState is a Future's state, whatever its type.
type futureState struct {
	fr   *funcRun
	seq  int
	name string
	done chan struct{} // closed once the call has a result here (or waits durably)
	out  []byte
	err  error
	// retry: the step failed and runs again later (its record says
	// when); child: a child run not settled yet. Either way the body
	// waits for it durably.
	retry, child bool
}

func (f *Future[O]) state() *futureState { return f.st }

// resolved reports whether the call has its result here.
func (s *futureState) resolved() bool {
	select {
	case <-s.done:
		return !s.retry && !s.child
	default:
		return false
	}
}

// durable reports whether the body must wait for the call durably.
func (s *futureState) durable() bool {
	select {
	case <-s.done:
		return s.retry || s.child
	default:
		return false
	}
}

// Get returns the call's result, waiting for it: a step started with Go
// runs to its end in this process; a step's retry, or a child run, is
// waited for durably (the function holds nothing meanwhile and runs again
// when it is over).
func (f *Future[O]) Get(ctx FuncContext) (O, error) {
	var zero O
	fr := runOf(ctx)
	st := f.st
	if st == nil || st.fr != fr {
		fr.failWith(fmt.Errorf("%w: a Future of another run, or none", ErrInvalidOption))
	}
	<-st.done
	if st.durable() {
		fr.suspend(nil, []int{st.seq}, false)
	}
	fr.ended()
	if st.err != nil {
		return zero, st.err
	}
	return decodeCall[O](fr, st.name, st.out)
}

// AwaitAll waits for every call of fs to have its result (see Get), and
// returns the first error among them, in their order.
func AwaitAll(ctx FuncContext, fs ...Awaitable) error {
	fr := runOf(ctx)
	var wait []int
	for _, f := range fs {
		st := fr.own(f)
		<-st.done
		if st.durable() {
			wait = append(wait, st.seq)
		}
	}
	if len(wait) > 0 {
		fr.suspend(nil, wait, false)
	}
	fr.ended()
	for _, f := range fs {
		if err := f.state().err; err != nil {
			return err
		}
	}
	return nil
}

// AwaitFirst waits for the first call of fs to have its result, and
// returns its index (the lowest, when several have). Read its result with
// Get; the others go on.
func AwaitFirst(ctx FuncContext, fs ...Awaitable) int {
	fr := runOf(ctx)
	if len(fs) == 0 {
		fr.failWith(fmt.Errorf("%w: AwaitFirst of nothing", ErrInvalidOption))
	}
	for {
		var running []reflect.SelectCase
		var wait []int
		for k, f := range fs {
			st := fr.own(f)
			switch {
			case st.resolved():
				fr.ended()
				return k
			case st.durable():
				wait = append(wait, st.seq)
			default:
				running = append(running, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(st.done)})
			}
		}
		if len(running) == 0 {
			fr.suspend(nil, wait, true)
		}
		reflect.Select(running)
	}
}

// own returns the state of a future of this execution; any other is a
// misuse that fails the function.
func (fr *funcRun) own(f Awaitable) *futureState {
	var st *futureState
	if f != nil && !reflect.ValueOf(f).IsNil() {
		st = f.state()
	}
	if st == nil || st.fr != fr {
		fr.failWith(fmt.Errorf("%w: a Future of another run, or none", ErrInvalidOption))
	}
	return st
}

// Go starts fn as a step of the function, as Do does, but without waiting
// for it: it runs in a goroutine of the body's process, at most
// MaxParallel of them at once (Go waits for a free one). Its result is
// recorded as it completes; read it with Get, or wait for several with
// AwaitAll or AwaitFirst. Steps still running when the function returns
// run to their end first.
func Go[O any](ctx FuncContext, name string, fn func(ctx Context) (O, error), opts ...StepOption) *Future[O] {
	fr := runOf(ctx)
	cd := fr.options(name, durabletype.KindStep, opts)
	seq, rec := fr.call(name, durabletype.KindStep)
	if fn == nil {
		fr.failWith(fmt.Errorf("%w: call %q: nil step function", ErrNilFunc, name))
	}
	st := &futureState{fr: fr, seq: seq, name: name, done: make(chan struct{})}
	if due := dag.RetryDue(rec); !due.IsZero() && due.After(time.Now()) {
		st.retry = true
		close(st.done)
		return &Future[O]{st: st}
	}
	if rec != nil && rec.State != durabletype.TaskPending {
		st.out, st.err, _ = fr.runCall(seq, name, rec, cd, nil)
		close(st.done)
		return &Future[O]{st: st}
	}
	fr.slots <- struct{}{}
	fr.running.Add(1)
	go func() {
		defer func() {
			<-fr.slots
			close(st.done)
			fr.running.Done()
		}()
		var retry *store.Record
		st.out, st.err, retry = fr.runCall(seq, name, rec, cd, func(c Context) (any, error) { return fn(c) })
		if retry != nil {
			if err := fr.record(*retry); err != nil {
				st.err = err
				return
			}
			st.retry = true
		}
	}()
	return &Future[O]{st: st}
}

// StartChild starts a run of the function child, with input in, as a
// child run of this one, and returns its result to come: Get waits for it
// durably. The child run inherits the tenant and the priority; it is
// cancelled with this run (and when this function returns without waiting
// for it). Register child with the engines that run it.
func StartChild[CI, CO any](ctx FuncContext, name string, child *Function[CI, CO], in CI) *Future[CO] {
	fr := runOf(ctx)
	if child == nil || child.body == nil {
		fr.failWith(fmt.Errorf("%w: call %q: nil child function", ErrInvalidOption, name))
	}
	return startChild[CO](fr, name, child.def, FuncBody, in)
}

// StartWorkflow starts a run of the workflow w, with input in, as a child
// run of this one; its result to come is the output of w's step result
// (Get waits for it durably; it fails with a *StepError when the child
// run fails, and when result was skipped).
func StartWorkflow[CI, CO any](ctx FuncContext, name string, w *Workflow[CI], result *StepRef[CO], in CI) *Future[CO] {
	fr := runOf(ctx)
	if w == nil || w.def == nil || result == nil || result.def == nil || result.def.wf != w.def {
		fr.failWith(fmt.Errorf("%w: call %q: a workflow and one of its steps", ErrInvalidOption, name))
	}
	return startChild[CO](fr, name, w.def, result.def.name, in)
}

func startChild[CO any](fr *funcRun, name string, d *workflowDef, result string, in any) *Future[CO] {
	seq, rec := fr.call(name, durabletype.KindChild)
	st := &futureState{fr: fr, seq: seq, name: name, done: make(chan struct{})}
	defer close(st.done)
	switch {
	case rec != nil && rec.State == durabletype.TaskWaiting:
		st.child = true
		return &Future[CO]{st: st}
	case rec != nil && rec.State == durabletype.TaskCompleted:
		st.out = rec.Output
		return &Future[CO]{st: st}
	case rec != nil:
		st.err = recordedError(rec)
		return &Future[CO]{st: st}
	}
	e := fr.e
	shape, err := e.shapeOf(d)
	if err != nil {
		fr.failWith(fmt.Errorf("call %q: child workflow %q: %w", name, d.name, err))
	}
	b, err := e.cfg.Codec.Marshal(in)
	if err == nil {
		_, err = d.decodeInput(e.cfg.Codec, b)
	}
	if err != nil {
		fr.failWith(fmt.Errorf("%w: call %q: child input: %w", ErrEncode, name, err))
	}
	if err := e.checkInput(fmt.Sprintf("the input of the child run of call %q", name), b); err != nil {
		fr.failWith(err)
	}
	keys, err := d.keys(in)
	if err != nil {
		fr.failWith(err)
	}
	nr := &store.NewRun{Workflow: d.name, Input: b, Shape: shape, Keys: keys, TraceParent: e.tel.traceParent(fr.sc)}
	if err := fr.record(store.Record{Seq: seq, Name: name, Kind: durabletype.KindChild, Child: nr, Result: result}); err != nil {
		fr.stop()
	}
	st.child = true
	return &Future[CO]{st: st}
}
