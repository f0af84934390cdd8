package workloads

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/core/sleep"
)

// Names of the crash proof's durable functions.
const (
	Func      = "crash-fn"
	FuncChild = "crash-fn-child"
)

// FuncParts is how many steps a crash-fn run starts in parallel (Go).
const FuncParts = 4

// FuncSignal is the signal a crash-fn run waits for (AwaitSignal): the
// crash tests send it to every run.
const FuncSignal = "approve"

// FuncKey is the event key the crash-fn run with input n waits for
// (AwaitEvent): the crash tests send it.
func FuncKey(n int) string { return "crash-fn-" + strconv.Itoa(n) }

// FuncInput is the input of crash-fn and crash-fn-child.
type FuncInput struct {
	N int `json:"n"`
}

// FuncOutput is a crash-fn run's output: what each of its calls returned
// to the function's last execution, in the order it made them. A step's
// result is "call/n/nonce" (see FuncStepResult); Paid and Approved are the
// payloads of the event and the signal, Child is the child run's output.
type FuncOutput struct {
	Prepare  string   `json:"prepare"`
	Flaky    string   `json:"flaky"`
	Ledger   string   `json:"ledger"`
	Parts    []string `json:"parts"`
	Child    string   `json:"child"`
	Paid     string   `json:"paid"`
	Approved string   `json:"approved"`
	Finish   string   `json:"finish"`
}

// FuncCalls are a crash-fn run's calls, in order, as the engine's API
// names their records ("name#seq"); FuncChildCalls those of a
// crash-fn-child run.
var (
	FuncCalls = []string{"prepare#0", "flaky#1", "ledger#2", "nap#3", "part-0#4", "part-1#5", "part-2#6", "part-3#7",
		"sub#8", "paid#9", "approve#10", "finish#11"}
	FuncChildCalls = []string{"a#0", "nap#1", "b#2"}
)

// FuncStepResult is the result of an execution of the step call of the run
// with input n: the call, n and the execution's nonce, a random word that
// tells the executions of one call apart (Options.FuncRecord records it).
func FuncStepResult(call string, n int, nonce string) string {
	return call + "/" + strconv.Itoa(n) + "/" + nonce
}

// ParseFuncStepResult splits a FuncStepResult.
func ParseFuncStepResult(s string) (call string, n int, nonce string, ok bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return "", 0, "", false
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		return "", 0, "", false
	}
	return parts[0], n, parts[2], true
}

// FuncRecorder is called by every execution of a step of crash-fn and
// crash-fn-child, before it works, with the execution's nonce, which the
// step returns in its result: the crash tests count executions (at least
// once) against the engine's records (exactly once), and match each
// recorded result to the execution that made it. It may return an error to
// fail the attempt.
type FuncRecorder func(ctx durable.Context, nonce string) error

// FuncTxWriter writes the row of crash-fn's transactional step (ledger)
// through tx, the store's transaction that records the step's result.
type FuncTxWriter func(ctx durable.Context, tx any, nonce string) error

// newFunctions defines crash-fn and crash-fn-child: durable functions that
// do steps one after another (prepare; flaky, whose first attempt fails and
// is retried after a durable backoff), a transactional step (ledger, DoTx),
// a durable sleep (nap), FuncParts steps in parallel (Go, AwaitAll), a child
// run (sub, of crash-fn-child: a, nap, b), a wait for the event FuncKey(n)
// (looking back an hour), a wait for the signal FuncSignal, and a last step
// (finish). Every step records its execution (Options.FuncRecord) and
// works for a random time up to Options.ChaosWork, so that a killed worker
// is likely to die mid-step.
func newFunctions(o Options) (*durable.Function[FuncInput, FuncOutput], *durable.Function[FuncInput, string]) {
	retry := durable.WithRetry(durable.RetryPolicy{MaxRetries: 20, InitialDelay: 100 * time.Millisecond, MaxDelay: time.Second})
	// A body runs as long as its run, and the chaos kills a worker about
	// every second: one run's body caught by three kills in a row (the
	// default limit, which fails the run as a poison step) is chance here,
	// not a body that kills its worker. TestDefaultsSurviveKills proves the
	// default limit.
	lost := durable.FuncLostLimit(10)
	// execute records an execution of call and works.
	execute := func(ctx durable.Context) (string, error) {
		nonce := strconv.FormatUint(rand.Uint64(), 36)
		if o.FuncRecord != nil {
			if err := o.FuncRecord(ctx, nonce); err != nil {
				return "", err
			}
		}
		if !sleep.For(ctx, time.Duration(rand.Int64N(int64(o.ChaosWork)+1))) {
			return "", ctx.Err()
		}
		return nonce, nil
	}
	step := func(call string, n int) func(durable.Context) (string, error) {
		return func(ctx durable.Context) (string, error) {
			nonce, err := execute(ctx)
			if err != nil {
				return "", err
			}
			return FuncStepResult(call, n, nonce), nil
		}
	}

	child := durable.NewFunction(FuncChild, func(ctx durable.FuncContext, in FuncInput) (string, error) {
		a, err := durable.Do(ctx, "a", step("a", in.N), retry)
		if err != nil {
			return "", err
		}
		durable.SleepFor(ctx, "nap", o.FuncSleep/2)
		b, err := durable.Do(ctx, "b", step("b", in.N), retry)
		if err != nil {
			return "", err
		}
		return a + "+" + b, nil
	}, lost)

	fn := durable.NewFunction(Func, func(ctx durable.FuncContext, in FuncInput) (FuncOutput, error) {
		var out FuncOutput
		var err error
		if out.Prepare, err = durable.Do(ctx, "prepare", step("prepare", in.N), retry); err != nil {
			return out, err
		}
		if out.Flaky, err = durable.Do(ctx, "flaky", func(ctx durable.Context) (string, error) {
			nonce, err := execute(ctx)
			if err != nil {
				return "", err
			}
			if ctx.Attempt() == 1 {
				return "", ErrFlaky
			}
			return FuncStepResult("flaky", in.N, nonce), nil
		}, retry); err != nil {
			return out, err
		}
		if out.Ledger, err = durable.DoTx(ctx, "ledger", func(ctx durable.Context, tx any) (string, error) {
			nonce, err := execute(ctx)
			if err != nil {
				return "", err
			}
			if o.FuncTx != nil {
				if err := o.FuncTx(ctx, tx, nonce); err != nil {
					return "", err
				}
			}
			// Work on after the write too, so that kills land between
			// the write and its commit with the step's result.
			if !sleep.For(ctx, time.Duration(rand.Int64N(int64(o.ChaosWork)+1))) {
				return "", ctx.Err()
			}
			return FuncStepResult("ledger", in.N, nonce), nil
		}, retry); err != nil {
			return out, err
		}
		durable.SleepFor(ctx, "nap", o.FuncSleep)
		parts := make([]*durable.Future[string], FuncParts)
		all := make([]durable.Awaitable, FuncParts)
		for k := range parts {
			call := fmt.Sprintf("part-%d", k)
			parts[k] = durable.Go(ctx, call, step(call, in.N), retry)
			all[k] = parts[k]
		}
		if err := durable.AwaitAll(ctx, all...); err != nil {
			return out, err
		}
		for _, f := range parts {
			v, err := f.Get(ctx)
			if err != nil {
				return out, err
			}
			out.Parts = append(out.Parts, v)
		}
		sub := durable.StartChild(ctx, "sub", child, in)
		if out.Paid, err = durable.AwaitEvent[string](ctx, "paid", FuncKey(in.N), durable.WithLookback(time.Hour)); err != nil {
			return out, err
		}
		if out.Approved, err = durable.AwaitSignal[string](ctx, "approve", FuncSignal); err != nil {
			return out, err
		}
		if out.Child, err = sub.Get(ctx); err != nil {
			return out, err
		}
		if out.Finish, err = durable.Do(ctx, "finish", step("finish", in.N), retry); err != nil {
			return out, err
		}
		return out, nil
	}, lost)
	return fn, child
}
