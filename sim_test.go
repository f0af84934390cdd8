package durable_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/core/sleep"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/store"
)

// TestSimulation is a randomized simulation: per seed, 3-4 engines share one
// in-memory store inside one synctest bubble, each through a store wrapper
// that injects faults (sim_store_test.go), while a fault-free client engine
// (never started) triggers 20-60 runs of two workflows and a durable
// function, sends the function's runs their signals, and waits for them.
// Afterwards every run is checked through the public API (Get, Events):
// settled with the expected status, every step's outcome recorded exactly
// once with the expected output, a causally ordered log whose per-step
// events follow the state machine of internal/core/dag, nothing left stuck, and
// every outcome of step code backed by an execution of that attempt, and
// every TxStep's commit effect run exactly once if it completed (by the
// attempt that completed it), never otherwise. A function's run (and its
// child run) is checked alike (simCheckFunc): its output, each call's
// record completed exactly once with its output by the attempt expected,
// its body's events following its claims, every execution of its body of
// a claimed attempt, and its DoTx's effect run once.
//
// Faults, from a plan derived from the seed (math/rand/v2, PCG):
//   - transient errors of ClaimTasks, FinishTasks, Heartbeat, FireTimers and
//     RescueTasks, either before the call reaches the store (nothing
//     happened) or after it took effect (an ambiguous commit);
//   - FinishTx (TxSteps) failing to begin (the step does not run), failing
//     to commit (it ran, nothing is kept) or committing with its answer
//     lost (the engine must find out by recording a failure the store
//     reports as a duplicate);
//   - FinishTasks (and FinishTx's recorded outcomes) replayed with the same
//     outcomes, at once or later, functions' checkpoints and suspensions
//     included;
//   - heartbeats held past DeadAfter, so that live steps are rescued and run
//     again elsewhere while their late outcomes must be rejected;
//   - one engine (in most seeds) partitioned for good from the moment one of
//     its steps starts: its claims are only rescued by another engine's
//     leader, and at the end it is stopped with an expired context just to
//     release its goroutines.
//
// A seed reproduces the fault plan and the workload exactly, but goroutine
// interleavings may still differ between runs of the same seed: synctest
// makes time deterministic, not scheduling. A failure that depends on a rare
// interleaving may need a few runs of its seed to show again.
//
// DURABLE_SIM_SEED=n runs seed n alone; DURABLE_SIM_SEEDS=n runs seeds 1..n
// (default simSeedsDefault, fewer under -race: sim_race_test.go).
func TestSimulation(t *testing.T) {
	seeds, err := simSeeds()
	require.NoError(t, err)
	var tot simTotals
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			defer func() {
				r := recover()
				if r != nil {
					fmt.Fprintf(os.Stderr, "sim: seed %d panicked; re-run it alone with: %s\n", seed, simRepro(seed))
					panic(r)
				}
				if t.Failed() {
					t.Logf("seed %d failed; re-run it alone with: %s", seed, simRepro(seed))
				}
			}()
			synctest.Test(t, func(t *testing.T) { simRun(t, seed, &tot) })
		})
	}
	t.Logf("%d seeds: %s", len(seeds), tot.String())
}

// simSeedsDefault is the number of seeds run by default; sim_race_test.go
// lowers it under the race detector so that both runs fit in CI.
var simSeedsDefault = 300

// simRaceBuild is set by sim_race_test.go under the race detector.
var simRaceBuild = false

func simSeeds() ([]uint64, error) {
	if s := os.Getenv("DURABLE_SIM_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("DURABLE_SIM_SEED=%q: %w", s, err)
		}
		return []uint64{seed}, nil
	}
	n := simSeedsDefault
	if s := os.Getenv("DURABLE_SIM_SEEDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("DURABLE_SIM_SEEDS=%q: want a positive count", s)
		}
		n = v
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	return seeds, nil
}

func simRepro(seed uint64) string {
	race := ""
	if simRaceBuild {
		race = "-race "
	}
	return fmt.Sprintf("DURABLE_SIM_SEED=%d go test %s-run TestSimulation -count=1 -v .", seed, race)
}

// Engine settings: short but sane, so that rescues happen within seconds of
// virtual time.
const (
	simHeartbeat = time.Second
	simDeadAfter = 5 * time.Second
	simPoll      = 100 * time.Millisecond
	simMaxPoll   = 2 * time.Second
	simNap       = 20 * time.Second
	// simDeadline bounds, in virtual time, how long the client waits for
	// every run to settle; the workload needs a few minutes.
	simDeadline = 6 * time.Hour
	// simStopLimit bounds, in virtual time, how long an engine's Stop may
	// take before the seed is failed as wedged.
	simStopLimit = 10 * time.Minute
)

var simLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// The workload: two workflows whose step outputs are deterministic functions
// of the input, so that every recorded output can be checked.
//
// sim-a: split → part-0..2 (fan-out) → join (fan-in) → decide → left → left-2
// and decide → right → right-2 (complementary SkipIf: one branch runs, the
// other is skipped, its second step by the cascade) → merge (after both) →
// nap (durable sleep) → flaky (fails its first N%3 attempts; refuses inputs
// with Fail, which fails the run and runs the on-failure handler) → final.
//
// sim-b: seed → w-0..w-5 (a wide fan-out) → sum.
//
// Every step has generous retries and lost limits: permanent failures are
// not part of the plan (only flaky's deliberate refusal).
//
// part-1, flaky and w-2 are TxSteps: each attempt registers an effect with
// its *memstore.Tx (counting it per run, step and attempt), and some then
// fail or panic after the write (simTxFault), besides flaky's failures. The
// checks want exactly one effect, of the step's last attempt, for a step
// that completed, and none for any other.
//
// sim-f is a durable function (durable.NewFunction), its calls recorded as
// items of its body "main": a (Do) → b (Do, fails its first N%3 attempts:
// a durable backoff, the body suspended) → g-0 ∥ g-1 (Go + AwaitAll; g-1
// fails its first (N+1)%3 attempts, its retry recorded while the body
// runs) → nap (SleepFor) → tx (DoTx, an OnCommit effect per attempt; fails
// its first (N+2)%3 attempts before its write, and after it as simTxFault
// says) → sig (AwaitSignal, which the client sends at a planned moment,
// before or after the wait begins) → kid (StartChild of sim-f-kid, whose
// one call mul fails its first N%2 attempts) → its output. Each call's
// output depends on the ones before it, so that the body checks what its
// calls return, fresh or recorded.
const (
	simWorkflowA   = "sim-a"
	simWorkflowB   = "sim-b"
	simWorkflowF   = "sim-f"
	simWorkflowKid = "sim-f-kid"
)

type simInput struct {
	N    int    `json:"n"`
	Salt uint64 `json:"salt"`
	Fail bool   `json:"fail,omitempty"`
}

func simSplit(in simInput) int         { return 3*in.N + 1 }
func simPart(in simInput, i int) int   { return simSplit(in)*(i+2) + in.N }
func simJoin(in simInput) int          { return simPart(in, 0) + simPart(in, 1) + simPart(in, 2) }
func simEven(in simInput) bool         { return in.N%2 == 0 }
func simLeft(in simInput) string       { return fmt.Sprintf("left-%d", in.N) }
func simRight(in simInput) string      { return fmt.Sprintf("right-%d", in.N) }
func simFlaky(in simInput) int         { return 7 * in.N }
func simFinal(in simInput) string      { return fmt.Sprintf("%d|%d", simFlaky(in), simJoin(in)) }
func simRefusal(in simInput) string    { return fmt.Sprintf("input %d refused", in.N) }
func simSeedOut(in simInput) int       { return 5*in.N + 2 }
func simWide(in simInput, i int) int   { return simSeedOut(in) + i*i + in.N }
func simFlakyFailures(in simInput) int { return in.N % 3 }

func simMerge(in simInput) string {
	if simEven(in) {
		return "merged:" + simLeft(in) + "/2"
	}
	return "merged:" + simRight(in) + "/2"
}

func simSum(in simInput) int {
	s := 0
	for i := range simWidth {
		s += simWide(in, i)
	}
	return s
}

const simWidth = 6

// The TxSteps among the parts of sim-a and the wide steps of sim-b.
const (
	simTxPart = 1
	simTxWide = 2
)

// The calls of sim-f and sim-f-kid: their outputs, and how many of their
// first attempts fail.
const simSignal = "go"

func simFA(in simInput) int            { return 11*in.N + 3 }
func simFB(in simInput) int            { return simFA(in) + in.N%5 }
func simFG(in simInput, i int) int     { return simFB(in)*(i+1) + i }
func simFTx(in simInput) int           { return simFG(in, 0) + simFG(in, 1) }
func simFSig(in simInput) string       { return fmt.Sprintf("go-%d", in.N) }
func simKidInput(in simInput) simInput { return simInput{N: in.N + 1000, Salt: in.Salt ^ 0x4b1d} }
func simFKid(kid simInput) int         { return 2*kid.N + 1 }
func simFOut(in simInput) string {
	return fmt.Sprintf("%d/%s/%d", simFTx(in), simFSig(in), simFKid(simKidInput(in)))
}

// simFailures is how many first attempts of call name of sim-f (or of
// sim-f-kid) fail before doing anything.
func simFailures(in simInput, name string) int {
	switch name {
	case "b":
		return in.N % 3
	case "g-1":
		return (in.N + 1) % 3
	case "tx":
		return (in.N + 2) % 3
	case "mul":
		return in.N % 2
	}
	return 0
}

// simCallAttempt is the attempt that completes call name: the first that
// neither fails before its work nor, for the DoTx, after its write.
func simCallAttempt(in simInput, name string, tx bool) int {
	a := simFailures(in, name) + 1
	for tx && simTxFault(in.Salt, name, a) != 0 {
		a++
	}
	return a
}

// simCallSpec is one call of a function, as the checks know it.
type simCallSpec struct {
	name   string
	kind   durabletype.TaskKind
	output any // nil for a sleep
	tx     bool
}

// simFuncCalls returns the calls of a run of sim-f (or sim-f-kid) with
// input in, in order, and the function's output.
func simFuncCalls(workflow string, in simInput) ([]simCallSpec, any) {
	if workflow == simWorkflowKid {
		return []simCallSpec{{name: "mul", kind: durabletype.KindStep, output: simFKid(in)}}, simFKid(in)
	}
	return []simCallSpec{
		{name: "a", kind: durabletype.KindStep, output: simFA(in)},
		{name: "b", kind: durabletype.KindStep, output: simFB(in)},
		{name: "g-0", kind: durabletype.KindStep, output: simFG(in, 0)},
		{name: "g-1", kind: durabletype.KindStep, output: simFG(in, 1)},
		{name: "nap", kind: durabletype.KindSleep},
		{name: "tx", kind: durabletype.KindStep, output: simFTx(in), tx: true},
		{name: "sig", kind: durabletype.KindEvent, output: simFSig(in)},
		{name: "kid", kind: durabletype.KindChild, output: simFKid(simKidInput(in))},
	}, simFOut(in)
}

// simStepSpec is one step of a workflow's shape, as the checks know it.
type simStepSpec struct {
	name    string
	parents []string
	sleep   time.Duration
	tx      bool // a TxStep
}

var simShapeA = []simStepSpec{
	{name: "split"},
	{name: "part-0", parents: []string{"split"}},
	{name: "part-1", parents: []string{"split"}, tx: true},
	{name: "part-2", parents: []string{"split"}},
	{name: "join", parents: []string{"part-0", "part-1", "part-2"}},
	{name: "decide", parents: []string{"join"}},
	{name: "left", parents: []string{"decide"}},
	{name: "left-2", parents: []string{"left"}},
	{name: "right", parents: []string{"decide"}},
	{name: "right-2", parents: []string{"right"}},
	{name: "merge", parents: []string{"left-2", "right-2"}},
	{name: "nap", parents: []string{"merge"}, sleep: simNap},
	{name: "flaky", parents: []string{"nap"}, tx: true},
	{name: "final", parents: []string{"flaky", "join"}},
}

var simShapeB = func() []simStepSpec {
	shape := []simStepSpec{{name: "seed"}}
	var wide []string
	for i := range simWidth {
		name := fmt.Sprintf("w-%d", i)
		wide = append(wide, name)
		shape = append(shape, simStepSpec{name: name, parents: []string{"seed"}, tx: i == simTxWide})
	}
	return append(shape, simStepSpec{name: "sum", parents: wide})
}()

// simRetry is every step's policy: enough attempts to absorb the injected
// failures.
var simRetry = durable.WithRetry(durable.RetryPolicy{MaxRetries: 30, InitialDelay: 500 * time.Millisecond, MaxDelay: 4 * time.Second})

// simLost is every step's lost limit. The simulation loses attempts far more
// often than a fleet does (claims whose commit the engine does not hear of,
// at rates up to 2 in 3, partitions, delayed heartbeats), so a step can be
// lost several times in a row without killing anything; the default limit
// (3) would fail such runs as poison steps, which the plan does not have.
var simLost = durable.WithLostLimit(30)

// simFuncLost is the lost limit of the functions' bodies, as simLost is
// every step's.
var simFuncLost = durable.FuncLostLimit(30)

// simRunSpec is one run of the workload.
type simRunSpec struct {
	workflow string
	tenant   string
	in       simInput
	// signalAfter is when, after the run is triggered, the client sends
	// a run of sim-f its signal.
	signalAfter time.Duration
}

func (r simRunSpec) shape() []simStepSpec {
	if r.workflow == simWorkflowA {
		return simShapeA
	}
	return simShapeB
}

// simWant is the expected final state (and output, when not nil) of a step.
type simWant struct {
	state  durabletype.TaskState
	output any
}

// want returns the run's expected status and its steps' expected ends.
func (r simRunSpec) want() (durabletype.RunStatus, map[string]simWant) {
	in := r.in
	done := func(v any) simWant { return simWant{state: durabletype.TaskCompleted, output: v} }
	skipped := simWant{state: durabletype.TaskSkipped}
	w := map[string]simWant{}
	if r.workflow == simWorkflowB {
		w["seed"] = done(simSeedOut(in))
		for i := range simWidth {
			w[fmt.Sprintf("w-%d", i)] = done(simWide(in, i))
		}
		w["sum"] = done(simSum(in))
		return durabletype.RunCompleted, w
	}
	w["split"] = done(simSplit(in))
	for i := range 3 {
		w[fmt.Sprintf("part-%d", i)] = done(simPart(in, i))
	}
	w["join"] = done(simJoin(in))
	w["decide"] = done(simEven(in))
	w["left"], w["left-2"], w["right"], w["right-2"] = skipped, skipped, skipped, skipped
	if simEven(in) {
		w["left"], w["left-2"] = done(simLeft(in)), done(simLeft(in)+"/2")
	} else {
		w["right"], w["right-2"] = done(simRight(in)), done(simRight(in)+"/2")
	}
	w["merge"] = done(simMerge(in))
	w["nap"] = simWant{state: durabletype.TaskCompleted}
	if in.Fail {
		w["flaky"] = simWant{state: durabletype.TaskFailed}
		w["final"] = simWant{state: durabletype.TaskCancelled}
		w[durabletype.OnFailureTask] = simWant{state: durabletype.TaskCompleted}
		return durabletype.RunFailed, w
	}
	w["flaky"] = done(simFlaky(in))
	w["final"] = done(simFinal(in))
	return durabletype.RunCompleted, w
}

// simPlan is everything a seed decides up front.
type simPlan struct {
	seed        uint64
	engines     int
	concurrency []int
	tenantLimit int
	rates       []simFaultRates
	faultSeeds  []uint64
	victim      int // the engine partitioned for good, or -1
	victimAt    int // ... when its victimAt-th step execution starts
	runs        []simRunSpec
	batches     []int           // runs per trigger batch
	gaps        []time.Duration // virtual time before each batch
}

func newSimPlan(seed uint64) *simPlan {
	r := rand.New(rand.NewPCG(seed, 0x51a7e5eed))
	p := &simPlan{seed: seed, engines: 3 + r.IntN(2), victim: -1}
	p.tenantLimit = 0
	if r.IntN(4) == 0 {
		p.tenantLimit = 2 + r.IntN(3)
	}
	storm := r.IntN(5) == 0 // a fifth of the seeds get many more errors
	for range p.engines {
		p.concurrency = append(p.concurrency, 2+r.IntN(7))
		rates := simFaultRates{
			Fail:           0.08 * r.Float64(),
			Ambiguous:      r.Float64(),
			Replay:         0.3 * r.Float64(),
			ReplayLater:    r.Float64(),
			HeartbeatDelay: 0.04 * r.Float64(),
		}
		if storm {
			rates.Fail = 0.1 + 0.15*r.Float64()
		}
		p.rates = append(p.rates, rates)
		p.faultSeeds = append(p.faultSeeds, r.Uint64())
	}
	if r.IntN(4) != 0 {
		p.victim = r.IntN(p.engines)
		p.victimAt = 1 + r.IntN(6)
	}
	tenants := 1 + r.IntN(4)
	n := 20 + r.IntN(41)
	for i := range n {
		spec := simRunSpec{workflow: simWorkflowA, tenant: fmt.Sprintf("tenant-%d", r.IntN(tenants))}
		switch k := r.IntN(10); {
		case k < 3:
			spec.workflow = simWorkflowB
		case k < 5:
			spec.workflow = simWorkflowF
			spec.signalAfter = time.Duration(r.IntN(90_000)) * time.Millisecond
		}
		spec.in = simInput{N: i, Salt: r.Uint64(), Fail: spec.workflow == simWorkflowA && r.IntN(8) == 0}
		p.runs = append(p.runs, spec)
	}
	for left := n; left > 0; {
		b := min(left, 1+r.IntN(n))
		p.batches = append(p.batches, b)
		left -= b
		var gap time.Duration
		if len(p.batches) > 1 {
			gap = time.Duration(r.IntN(30_000)) * time.Millisecond
		}
		p.gaps = append(p.gaps, gap)
	}
	return p
}

func (p *simPlan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "engines=%d concurrency=%v tenantLimit=%d runs=%d batches=%v", p.engines, p.concurrency, p.tenantLimit, len(p.runs), p.batches)
	if p.victim >= 0 {
		fmt.Fprintf(&b, " partition=%s@exec%d", simWorker(p.victim), p.victimAt)
	}
	for i, r := range p.rates {
		fmt.Fprintf(&b, "\n  %s: %s", simWorker(i), r)
	}
	return b.String()
}

func simWorker(i int) string { return fmt.Sprintf("sim-e%d", i) }

// simDuration is how long an attempt of a step works, in virtual time: a
// function of the run's salt, the step and the attempt. Mostly under a
// second, a fifth of the time longer than DeadAfter (so that heartbeats
// matter, and a delayed heartbeat gets a live step rescued).
func simDuration(salt uint64, step string, attempt int) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(step))
	r := rand.New(rand.NewPCG(salt, h.Sum64()^uint64(attempt)))
	switch p := r.IntN(100); {
	case p < 55:
		return time.Duration(r.IntN(1000)) * time.Millisecond
	case p < 80:
		return time.Second + time.Duration(r.IntN(2000))*time.Millisecond
	default:
		return 4*time.Second + time.Duration(r.IntN(8000))*time.Millisecond
	}
}

type simExecKey struct {
	run     uuid.UUID
	step    string
	attempt int
}

// simState is what a seed's step code shares: the execution counts, and the
// fault stores (the partition starts from inside a step).
type simState struct {
	plan   *simPlan
	stores []*simFaultStore

	mu         sync.Mutex
	execs      map[simExecKey]int
	perWorker  map[string]int
	effects    map[simExecKey]int // TxStep effects run, by attempt
	violations []string
}

// effect is a TxStep's OnCommit effect: it runs under the store's lock as
// the attempt's outcome is recorded.
func (s *simState) effect(k simExecKey) {
	s.mu.Lock()
	s.effects[k]++
	s.mu.Unlock()
}

func (s *simState) violation(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violations = append(s.violations, fmt.Sprintf(format, args...))
}

// executed counts an execution of step code, and partitions the victim
// engine when its chosen execution starts.
func (s *simState) executed(ctx durable.Context) {
	s.mu.Lock()
	s.execs[simExecKey{ctx.RunID(), ctx.StepName(), ctx.Attempt()}]++
	s.perWorker[ctx.WorkerID()]++
	cut := s.plan.victim >= 0 && ctx.WorkerID() == simWorker(s.plan.victim) && s.perWorker[ctx.WorkerID()] == s.plan.victimAt
	s.mu.Unlock()
	if cut {
		s.stores[s.plan.victim].partition()
	}
}

// work takes the attempt's virtual time, honouring ctx; a long attempt
// heartbeats from inside the step halfway through.
func (s *simState) work(ctx durable.Context, in simInput) error {
	d := simDuration(in.Salt, ctx.StepName(), ctx.Attempt())
	wait := func(d time.Duration) error {
		if !sleep.For(ctx, d) {
			return context.Cause(ctx)
		}
		return nil
	}
	if d >= 3*time.Second {
		if err := wait(d / 2); err != nil {
			return err
		}
		if err := ctx.Heartbeat(); errors.Is(err, durable.ErrClaimLost) {
			return err
		}
		d -= d / 2
	}
	return wait(d)
}

// simStep wraps a step body: count the execution, work, then compute.
func simStep[O any](s *simState, fn func(ctx durable.Context, in simInput) (O, error)) func(durable.Context, simInput) (O, error) {
	return func(ctx durable.Context, in simInput) (O, error) {
		s.executed(ctx)
		if err := s.work(ctx, in); err != nil {
			var zero O
			return zero, err
		}
		return fn(ctx, in)
	}
}

// simTxFault decides whether a TxStep's attempt fails after its write:
// 0 (it does not), 1 (it returns an error) or 2 (it panics). A function of
// the run's salt, the step and the attempt, like simDuration.
func simTxFault(salt uint64, step string, attempt int) int {
	h := fnv.New64a()
	h.Write([]byte(step))
	r := rand.New(rand.NewPCG(salt^0x7e57, h.Sum64()^uint64(attempt)))
	switch p := r.IntN(100); {
	case p < 15:
		return 1
	case p < 20:
		return 2
	}
	return 0
}

// simTxStep wraps a TxStep's body: count the execution, register the
// effect that counts the attempt's commit, work, compute, then sometimes
// fail after all, so that the write is rolled back.
func simTxStep[O any](s *simState, fn func(ctx durable.Context, in simInput) (O, error)) func(durable.Context, *memstore.Tx, simInput) (O, error) {
	return func(ctx durable.Context, tx *memstore.Tx, in simInput) (O, error) {
		var zero O
		s.executed(ctx)
		k := simExecKey{ctx.RunID(), ctx.StepName(), ctx.Attempt()}
		tx.OnCommit(func() { s.effect(k) })
		if err := s.work(ctx, in); err != nil {
			return zero, err
		}
		out, err := fn(ctx, in)
		if err != nil {
			return zero, err
		}
		switch simTxFault(in.Salt, k.step, k.attempt) {
		case 1:
			return zero, fmt.Errorf("sim: %s fails after its write on attempt %d", k.step, k.attempt)
		case 2:
			panic(fmt.Sprintf("sim: %s panics after its write on attempt %d", k.step, k.attempt))
		}
		return out, nil
	}
}

// parent checks a parent's output as the step sees it.
func simParent[O comparable](s *simState, ctx durable.Context, ref *durable.StepRef[O], want O, present bool) (O, error) {
	got, ok := ref.Output(ctx)
	if ok != present || got != want {
		s.violation("run %s step %s attempt %d: parent %s output (%v, %v), want (%v, %v)",
			ctx.RunID(), ctx.StepName(), ctx.Attempt(), ref.Name(), got, ok, want, present)
		return got, durable.Terminal(fmt.Errorf("sim: wrong output of parent %s", ref.Name()))
	}
	return got, nil
}

func (s *simState) workflows() (*durable.Workflow[simInput], *durable.Workflow[simInput]) {
	a := durable.NewWorkflow[simInput](simWorkflowA)
	split := durable.Step(a, "split", simStep(s, func(ctx durable.Context, in simInput) (int, error) {
		return simSplit(in), nil
	}), simRetry, simLost)
	var parts []*durable.StepRef[int]
	for i := range 3 {
		name := fmt.Sprintf("part-%d", i)
		body := func(ctx durable.Context, in simInput) (int, error) {
			v, err := simParent(s, ctx, split, simSplit(in), true)
			return v*(i+2) + in.N, err
		}
		if i == simTxPart {
			parts = append(parts, durable.TxStep(a, name, simTxStep(s, body), durable.After(split), simRetry, simLost))
		} else {
			parts = append(parts, durable.Step(a, name, simStep(s, body), durable.After(split), simRetry, simLost))
		}
	}
	join := durable.Step(a, "join", simStep(s, func(ctx durable.Context, in simInput) (int, error) {
		sum := 0
		for i, p := range parts {
			v, err := simParent(s, ctx, p, simPart(in, i), true)
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	}), durable.After(parts[0], parts[1], parts[2]), simRetry, simLost)
	decide := durable.Step(a, "decide", simStep(s, func(ctx durable.Context, in simInput) (bool, error) {
		_, err := simParent(s, ctx, join, simJoin(in), true)
		return simEven(in), err
	}), durable.After(join), simRetry, simLost)
	left := durable.Step(a, "left", simStep(s, func(ctx durable.Context, in simInput) (string, error) {
		_, err := simParent(s, ctx, decide, true, true)
		return simLeft(in), err
	}), durable.After(decide), durable.SkipIf(decide, func(even bool) bool { return !even }), simRetry, simLost)
	left2 := durable.Step(a, "left-2", simStep(s, func(ctx durable.Context, in simInput) (string, error) {
		v, err := simParent(s, ctx, left, simLeft(in), true)
		return v + "/2", err
	}), durable.After(left), simRetry, simLost)
	right := durable.Step(a, "right", simStep(s, func(ctx durable.Context, in simInput) (string, error) {
		_, err := simParent(s, ctx, decide, false, true)
		return simRight(in), err
	}), durable.After(decide), durable.SkipIf(decide, func(even bool) bool { return even }), simRetry, simLost)
	right2 := durable.Step(a, "right-2", simStep(s, func(ctx durable.Context, in simInput) (string, error) {
		v, err := simParent(s, ctx, right, simRight(in), true)
		return v + "/2", err
	}), durable.After(right), simRetry, simLost)
	merge := durable.Step(a, "merge", simStep(s, func(ctx durable.Context, in simInput) (string, error) {
		// Exactly one branch ran; the other is absent.
		even := simEven(in)
		wantL, wantR := "", ""
		if even {
			wantL = simLeft(in) + "/2"
		} else {
			wantR = simRight(in) + "/2"
		}
		l, err := simParent(s, ctx, left2, wantL, even)
		if err != nil {
			return "", err
		}
		r, err := simParent(s, ctx, right2, wantR, !even)
		return "merged:" + l + r, err
	}), durable.After(left2, right2), simRetry, simLost)
	nap := durable.Sleep(a, "nap", simNap, durable.After(merge), simRetry, simLost)
	flaky := durable.TxStep(a, "flaky", simTxStep(s, func(ctx durable.Context, in simInput) (int, error) {
		if n := ctx.Attempt(); n <= simFlakyFailures(in) {
			return 0, fmt.Errorf("transient failure on attempt %d", n)
		}
		if in.Fail {
			return 0, durable.Terminal(errors.New(simRefusal(in)))
		}
		return simFlaky(in), nil
	}), durable.After(nap), simRetry, simLost)
	durable.Step(a, "final", simStep(s, func(ctx durable.Context, in simInput) (string, error) {
		f, err := simParent(s, ctx, flaky, simFlaky(in), true)
		if err != nil {
			return "", err
		}
		j, err := simParent(s, ctx, join, simJoin(in), true)
		return fmt.Sprintf("%d|%d", f, j), err
	}), durable.After(flaky, join), simRetry, simLost)
	a.OnFailure(func(ctx durable.Context, in simInput, f durable.Failure) error {
		s.executed(ctx)
		if want := (durable.Failure{Step: "flaky", Error: simRefusal(in)}); !in.Fail || f != want {
			s.violation("run %s: on-failure handler called with %+v (input %+v)", ctx.RunID(), f, in)
		}
		return s.work(ctx, in)
	}, simRetry, simLost)

	b := durable.NewWorkflow[simInput](simWorkflowB)
	seed := durable.Step(b, "seed", simStep(s, func(ctx durable.Context, in simInput) (int, error) {
		return simSeedOut(in), nil
	}), simRetry, simLost)
	var wide []durable.Parent
	var wideRefs []*durable.StepRef[int]
	for i := range simWidth {
		name := fmt.Sprintf("w-%d", i)
		body := func(ctx durable.Context, in simInput) (int, error) {
			v, err := simParent(s, ctx, seed, simSeedOut(in), true)
			return v + i*i + in.N, err
		}
		var ref *durable.StepRef[int]
		if i == simTxWide {
			ref = durable.TxStep(b, name, simTxStep(s, body), durable.After(seed), simRetry, simLost)
		} else {
			ref = durable.Step(b, name, simStep(s, body), durable.After(seed), simRetry, simLost)
		}
		wide = append(wide, ref)
		wideRefs = append(wideRefs, ref)
	}
	durable.Step(b, "sum", simStep(s, func(ctx durable.Context, in simInput) (int, error) {
		sum := 0
		for i, ref := range wideRefs {
			v, err := simParent(s, ctx, ref, simWide(in, i), true)
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	}), durable.After(wide...), simRetry, simLost)
	return a, b
}

// simCall is the step of a function's call: count the execution, fail the
// call's first attempts (simFailures), work, then compute.
func simCall(s *simState, in simInput, out func() int) func(durable.Context) (int, error) {
	return func(ctx durable.Context) (int, error) {
		s.executed(ctx)
		if n := ctx.Attempt(); n <= simFailures(in, ctx.StepName()) {
			return 0, fmt.Errorf("transient failure of call %s on attempt %d", ctx.StepName(), n)
		}
		if err := s.work(ctx, in); err != nil {
			return 0, err
		}
		return out(), nil
	}
}

// simCallTx is simCall for a DoTx: each attempt registers the effect that
// counts its commit first, and fails after its write as simTxFault says.
func simCallTx(s *simState, in simInput, out func() int) func(durable.Context, *memstore.Tx) (int, error) {
	return func(ctx durable.Context, tx *memstore.Tx) (int, error) {
		k := simExecKey{ctx.RunID(), ctx.StepName(), ctx.Attempt()}
		tx.OnCommit(func() { s.effect(k) })
		v, err := simCall(s, in, out)(ctx)
		if err != nil {
			return 0, err
		}
		switch simTxFault(in.Salt, k.step, k.attempt) {
		case 1:
			return 0, fmt.Errorf("sim: %s fails after its write on attempt %d", k.step, k.attempt)
		case 2:
			panic(fmt.Sprintf("sim: %s panics after its write on attempt %d", k.step, k.attempt))
		}
		return v, nil
	}
}

// simGot checks, in a function's body, the result of one of its calls.
func simGot[T comparable](s *simState, ctx durable.FuncContext, call string, got T, err error, want T) error {
	if err == nil && got == want {
		return nil
	}
	s.violation("run %s (%s) attempt %d: call %s returned (%v, %v), want %v", ctx.RunID(), ctx.StepName(), ctx.Attempt(), call, got, err, want)
	return fmt.Errorf("sim: call %s returned (%v, %v), want %v", call, got, err, want)
}

// functions declares sim-f and its child sim-f-kid (see the workload's
// comment).
func (s *simState) functions() (*durable.Function[simInput, string], *durable.Function[simInput, int]) {
	kid := durable.NewFunction(simWorkflowKid, func(ctx durable.FuncContext, in simInput) (int, error) {
		s.executed(ctx)
		v, err := durable.Do(ctx, "mul", simCall(s, in, func() int { return simFKid(in) }), simRetry)
		if err := simGot(s, ctx, "mul", v, err, simFKid(in)); err != nil {
			return 0, err
		}
		return v, nil
	}, simFuncLost)
	fn := durable.NewFunction(simWorkflowF, func(ctx durable.FuncContext, in simInput) (string, error) {
		s.executed(ctx)
		a, err := durable.Do(ctx, "a", simCall(s, in, func() int { return simFA(in) }), simRetry)
		if err := simGot(s, ctx, "a", a, err, simFA(in)); err != nil {
			return "", err
		}
		b, err := durable.Do(ctx, "b", simCall(s, in, func() int { return a + in.N%5 }), simRetry)
		if err := simGot(s, ctx, "b", b, err, simFB(in)); err != nil {
			return "", err
		}
		g0 := durable.Go(ctx, "g-0", simCall(s, in, func() int { return b }), simRetry)
		g1 := durable.Go(ctx, "g-1", simCall(s, in, func() int { return 2*b + 1 }), simRetry)
		if err := durable.AwaitAll(ctx, g0, g1); err != nil {
			return "", simGot(s, ctx, "g-0 and g-1", 0, err, 0)
		}
		v0, err := g0.Get(ctx)
		if err := simGot(s, ctx, "g-0", v0, err, simFG(in, 0)); err != nil {
			return "", err
		}
		v1, err := g1.Get(ctx)
		if err := simGot(s, ctx, "g-1", v1, err, simFG(in, 1)); err != nil {
			return "", err
		}
		durable.SleepFor(ctx, "nap", simNap)
		t, err := durable.DoTx(ctx, "tx", simCallTx(s, in, func() int { return v0 + v1 }), simRetry)
		if err := simGot(s, ctx, "tx", t, err, simFTx(in)); err != nil {
			return "", err
		}
		sig, err := durable.AwaitSignal[string](ctx, "sig", simSignal)
		if err := simGot(s, ctx, "sig", sig, err, simFSig(in)); err != nil {
			return "", err
		}
		k, err := durable.StartChild(ctx, "kid", kid, simKidInput(in)).Get(ctx)
		if err := simGot(s, ctx, "kid", k, err, simFKid(simKidInput(in))); err != nil {
			return "", err
		}
		return fmt.Sprintf("%d/%s/%d", t, sig, k), nil
	}, simFuncLost)
	return fn, kid
}

// simRun runs one seed inside its bubble.
func simRun(t *testing.T, seed uint64, tot *simTotals) {
	plan := newSimPlan(seed)
	t.Logf("seed %d plan: %s", seed, plan)
	ctx := context.Background()
	s := memstore.New()
	sim := &simState{plan: plan, execs: map[simExecKey]int{}, perWorker: map[string]int{}, effects: map[simExecKey]int{}}
	wfA, wfB := sim.workflows()
	wfF, wfKid := sim.functions()

	client, err := durable.New(s, durable.Config{WorkerID: "sim-client", Logger: simLog})
	require.NoError(t, err)
	for i := range plan.engines {
		sim.stores = append(sim.stores, newSimFaultStore(s, simWorker(i), plan.faultSeeds[i], plan.rates[i], simDeadAfter))
	}
	var engines []*durable.Engine
	for i, fs := range sim.stores {
		e, err := durable.New(fs, durable.Config{
			WorkerID:          simWorker(i),
			Concurrency:       plan.concurrency[i],
			TenantLimit:       plan.tenantLimit,
			PollInterval:      simPoll,
			MaxPollInterval:   simMaxPoll,
			HeartbeatInterval: simHeartbeat,
			DeadAfter:         simDeadAfter,
			Logger:            simLog,
		})
		require.NoError(t, err)
		require.NoError(t, e.Register(wfA, wfB, wfF, wfKid))
		require.NoError(t, e.Start(ctx))
		engines = append(engines, e)
	}

	// Trigger the runs in batches, spread over virtual time; the client
	// sends each run of sim-f its signal at its planned moment.
	start := time.Now()
	ids := make([]uuid.UUID, 0, len(plan.runs))
	var signals sync.WaitGroup
	var signalErrs []string
	var signalMu sync.Mutex
	next := 0
	for b, size := range plan.batches {
		time.Sleep(plan.gaps[b])
		trigs := map[string][]durable.Trigger[simInput]{}
		idx := map[string][]int{}
		for i := next; i < next+size; i++ {
			spec := plan.runs[i]
			trigs[spec.workflow] = append(trigs[spec.workflow], durable.Trigger[simInput]{Tenant: spec.tenant, Input: spec.in})
			idx[spec.workflow] = append(idx[spec.workflow], i)
		}
		ids = ids[:next+size]
		for _, g := range []struct {
			name string
			wf   *durable.Workflow[simInput]
		}{{simWorkflowA, wfA}, {simWorkflowB, wfB}, {simWorkflowF, wfF.Workflow}} {
			if len(trigs[g.name]) == 0 {
				continue
			}
			got, err := g.wf.RunManyNoWait(ctx, client, trigs[g.name])
			require.NoError(t, err)
			for k, id := range got {
				ids[idx[g.name][k]] = id
			}
		}
		for _, i := range idx[simWorkflowF] {
			spec, id := plan.runs[i], ids[i]
			signals.Go(func() {
				time.Sleep(spec.signalAfter)
				if err := client.Signal(ctx, id, simSignal, simFSig(spec.in)); err != nil && !errors.Is(err, durabletype.ErrRunSettled) {
					signalMu.Lock()
					signalErrs = append(signalErrs, fmt.Sprintf("run %s: Signal: %v", id, err))
					signalMu.Unlock()
				}
			})
		}
		next += size
	}

	// Wait for every run, under one generous deadline.
	waitCtx, cancel := context.WithTimeout(ctx, simDeadline)
	unsettled := map[int]error{}
	for i, id := range ids {
		if _, err := client.Wait(waitCtx, id); err != nil {
			unsettled[i] = err
		}
	}
	cancel()
	elapsed := time.Since(start)
	signals.Wait()
	for _, e := range signalErrs {
		t.Error(e)
	}

	// Stop every engine: the partitioned one with an expired context, just
	// to release its goroutines; the others with a drain that every step
	// (none works longer than 12 s) fits in.
	for i, e := range engines {
		stopCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		partitioned := sim.stores[i].cut()
		if partitioned {
			cancel()
		}
		stopped := make(chan error, 1)
		go func() { stopped <- e.Stop(stopCtx) }()
		err, ok := simWithin(stopped, simStopLimit)
		if !ok {
			buf := make([]byte, 1<<20)
			t.Errorf("engine %s (partitioned: %v): Stop did not return within %s of virtual time; goroutines:\n%s",
				simWorker(i), partitioned, simStopLimit, buf[:runtime.Stack(buf, true)])
			// The seed has failed. Let the engine reach the store again so
			// that it can finish, and the bubble end, without aborting the
			// remaining seeds.
			sim.stores[i].heal()
			if err, ok = simWithin(stopped, simStopLimit); !ok {
				cancel()
				t.Errorf("engine %s: Stop still wedged after healing the partition", simWorker(i))
				return // the bubble reports the goroutines left behind
			}
			t.Logf("engine %s: Stop returned once the partition was healed", simWorker(i))
		}
		cancel()
		if !partitioned && err != nil {
			t.Errorf("engine %s: Stop: %v", simWorker(i), err)
		}
	}
	for _, fs := range sim.stores {
		fs.replays.Wait()
	}

	// Check every run through the public API.
	execs := map[uuid.UUID]map[simExecKey]int{}
	sim.mu.Lock()
	for k, n := range sim.execs {
		if execs[k.run] == nil {
			execs[k.run] = map[simExecKey]int{}
		}
		execs[k.run][k] = n
	}
	known := map[uuid.UUID]bool{}
	for _, id := range ids {
		known[id] = true
	}
	// The child runs of sim-f, by parent, as the parents' records name
	// them.
	kids := map[uuid.UUID]uuid.UUID{}
	for i, id := range ids {
		if plan.runs[i].workflow != simWorkflowF {
			continue
		}
		res, err := client.Get(ctx, id)
		require.NoError(t, err)
		for _, st := range res.Steps {
			if st.Kind == durabletype.KindChild && st.ChildRunID != uuid.Nil {
				kids[id] = st.ChildRunID
				known[st.ChildRunID] = true
			}
		}
	}
	for k := range sim.execs {
		if !known[k.run] {
			t.Errorf("step code ran for unknown run %s (step %s)", k.run, k.step)
		}
	}
	effects := map[uuid.UUID]map[simExecKey]int{}
	for k, n := range sim.effects {
		if !known[k.run] {
			t.Errorf("a TxStep's effect ran for unknown run %s (step %s)", k.run, k.step)
		}
		if effects[k.run] == nil {
			effects[k.run] = map[simExecKey]int{}
		}
		effects[k.run][k] = n
	}
	for _, v := range sim.violations {
		t.Errorf("step code: %s", v)
	}
	sim.mu.Unlock()

	stats := simSeedStats{plan: plan, elapsed: elapsed}
	dumped := 0
	for i, id := range ids {
		spec := plan.runs[i]
		res, err := client.Get(ctx, id)
		require.NoError(t, err)
		evs, err := client.Events(ctx, id)
		require.NoError(t, err)
		var probs []string
		if err := unsettled[i]; err != nil {
			probs = append(probs, fmt.Sprintf("did not settle within %s of virtual time: %v", simDeadline, err))
		}
		var kidRes *durable.RunResult
		var kidEvs []durabletype.Event
		if spec.workflow != simWorkflowF {
			probs = append(probs, simCheckRun(spec, res, evs, execs[id], effects[id], &stats)...)
		} else {
			tasks, err := s.ListTasks(ctx, id)
			require.NoError(t, err)
			probs = append(probs, simCheckFunc(simWorkflowF, spec.in, res, evs, tasks, execs[id], effects[id], &stats)...)
			if kid, ok := kids[id]; !ok {
				probs = append(probs, "no child run recorded")
			} else {
				kidRes, err = client.Get(ctx, kid)
				require.NoError(t, err)
				kidEvs, err = client.Events(ctx, kid)
				require.NoError(t, err)
				tasks, err := s.ListTasks(ctx, kid)
				require.NoError(t, err)
				if p := kidRes.Parent; p == nil || p.RunID != id {
					probs = append(probs, fmt.Sprintf("child run %s: parent %+v, want run %s", kid, p, id))
				}
				for _, p := range simCheckFunc(simWorkflowKid, simKidInput(spec.in), kidRes, kidEvs, tasks, execs[kid], effects[kid], &stats) {
					probs = append(probs, fmt.Sprintf("child run %s: %s", kid, p))
				}
			}
		}
		if len(probs) == 0 {
			continue
		}
		t.Errorf("run %d (%s, %s, input %+v, id %s):\n  %s", i, spec.workflow, spec.tenant, spec.in, id, strings.Join(probs, "\n  "))
		if dumped < 3 {
			dumped++
			t.Logf("run %d:\n%s", i, simDump(res, evs))
			if kidRes != nil {
				t.Logf("run %d's child run:\n%s", i, simDump(kidRes, kidEvs))
			}
		}
	}
	for _, fs := range sim.stores {
		st, violations := fs.snapshot()
		for _, v := range violations {
			t.Errorf("store wrapper: %s", v)
		}
		stats.faults = append(stats.faults, st)
	}
	t.Logf("seed %d: %s", seed, stats.String())
	tot.add(&stats)
}

// simWithin waits for done for up to d of virtual time.
func simWithin(done <-chan error, d time.Duration) (error, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err, true
	case <-t.C:
		return nil, false
	}
}

// The log checker: a state machine per step over the run's event log.

type simPhase int

const (
	simPending   simPhase = iota // no event yet
	simQueued                    // QUEUED: ready to be claimed
	simRunning                   // STARTED
	simBackoff                   // RETRYING: waiting for DueAt
	simSleeping                  // SLEEPING: waiting for DueAt
	simDone                      // a terminal event
	simLostPhase                 // LOST: the attempt's worker was lost
)

var simPhaseNames = [...]string{"pending", "queued", "running", "backoff", "sleeping", "done", "lost"}

func (p simPhase) String() string { return simPhaseNames[p] }

type simStepLog struct {
	phase   simPhase
	attempt int
	due     time.Time
	final   durabletype.EventType // the terminal event
	started map[int]int           // STARTED events by attempt
	// ran lists attempts whose outcome came from the step's code (COMPLETED,
	// or RETRYING/FAILED with the code's error rather than a rescue's).
	ran []int
}

func simRescued(detail string) bool { return strings.Contains(detail, " lost: no heartbeat for ") }

// simReplayLog checks the run's log event by event and returns the steps'
// logs by name.
func simReplayLog(id uuid.UUID, evs []durabletype.Event, shape []simStepSpec, bad func(string, ...any)) map[string]*simStepLog {
	specs := map[string]simStepSpec{}
	logs := map[string]*simStepLog{}
	for _, sp := range shape {
		specs[sp.name] = sp
		logs[sp.name] = &simStepLog{started: map[int]int{}}
	}
	failed := "" // the regular step whose FAILED event failed the run
	for k, ev := range evs {
		where := fmt.Sprintf("event %d (id %d, %s %s attempt %d)", k, ev.ID, ev.Step, ev.Type, ev.Attempt)
		if k > 0 {
			prev := evs[k-1]
			if ev.ID <= prev.ID {
				bad("%s: id not after the previous event's %d", where, prev.ID)
			}
			if ev.At.Before(prev.At) {
				bad("%s: at %s, before the previous event (%s)", where, ev.At.Format(time.StampMicro), prev.At.Format(time.StampMicro))
			}
		}
		if ev.RunID != id {
			bad("%s: belongs to run %s", where, ev.RunID)
		}
		onFailure := ev.Step == durabletype.OnFailureTask
		if onFailure && logs[ev.Step] == nil {
			if failed == "" {
				bad("%s: on-failure event before any step failed", where)
			}
			logs[ev.Step] = &simStepLog{started: map[int]int{}}
		}
		l := logs[ev.Step]
		if l == nil {
			bad("%s: unknown step", where)
			continue
		}
		sp := specs[ev.Step]
		if failed != "" && !onFailure {
			switch ev.Type {
			case durabletype.EventQueued, durabletype.EventStarted, durabletype.EventSleeping, durabletype.EventWoken, durabletype.EventRetrying:
				bad("%s: after step %s failed the run", where, failed)
			}
		}
		// resolved: the step's parents have all finished (which a step
		// leaving PENDING requires), and whether any completed.
		resolved := func() (all, anyCompleted bool) {
			for _, p := range sp.parents {
				pl := logs[p]
				if pl.phase != simDone {
					return false, false
				}
				switch pl.final {
				case durabletype.EventCompleted, durabletype.EventWoken:
					anyCompleted = true
				case durabletype.EventSkipped:
				default:
					return false, false
				}
			}
			return true, anyCompleted || len(sp.parents) == 0
		}
		wrong := func() { bad("%s: not allowed in phase %s (attempt %d)", where, l.phase, l.attempt) }
		finish := func() { l.phase, l.final = simDone, ev.Type }
		switch l.phase {
		case simPending:
			switch ev.Type {
			case durabletype.EventQueued:
				all, anyCompleted := resolved()
				switch {
				case sp.sleep > 0:
					bad("%s: a sleep step is never queued", where)
				case ev.Attempt != 0 || ev.Detail != "":
					bad("%s: first QUEUED has attempt %d, detail %q", where, ev.Attempt, ev.Detail)
				case !onFailure && (!all || !anyCompleted):
					bad("%s: queued before its parents %v completed", where, sp.parents)
				}
				l.phase = simQueued
			case durabletype.EventSleeping:
				all, anyCompleted := resolved()
				switch {
				case sp.sleep == 0:
					bad("%s: not a sleep step", where)
				case !all || !anyCompleted:
					bad("%s: asleep before its parents %v completed", where, sp.parents)
				case !ev.DueAt.Equal(ev.At.Add(sp.sleep)):
					bad("%s: due at %s, want %s after %s", where, ev.DueAt, sp.sleep, ev.At)
				}
				l.phase, l.due = simSleeping, ev.DueAt
			case durabletype.EventSkipped:
				if all, anyCompleted := resolved(); !all || anyCompleted || len(sp.parents) == 0 || ev.Detail != "all parents skipped" {
					bad("%s: cascade skip (detail %q) but parents %v are not all skipped", where, ev.Detail, sp.parents)
				}
				finish()
			case durabletype.EventCancelled:
				if failed == "" {
					bad("%s: cancelled although the run did not fail", where)
				}
				finish()
			default:
				wrong()
			}
		case simQueued:
			switch ev.Type {
			case durabletype.EventStarted:
				if ev.Attempt != l.attempt+1 {
					bad("%s: attempt after attempt %d", where, l.attempt)
				}
				l.phase, l.attempt = simRunning, ev.Attempt
				l.started[ev.Attempt]++
			case durabletype.EventCancelled:
				if failed == "" {
					bad("%s: cancelled although the run did not fail", where)
				}
				finish()
			default:
				wrong()
			}
		case simRunning:
			if ev.Type != durabletype.EventQueued && ev.Type != durabletype.EventCancelled && ev.Attempt != l.attempt {
				bad("%s: outcome of attempt %d", where, l.attempt)
			}
			switch ev.Type {
			case durabletype.EventCompleted:
				l.ran = append(l.ran, ev.Attempt)
				finish()
			case durabletype.EventSkipped:
				if !strings.Contains(ev.Detail, "skip condition") {
					bad("%s: skipped while running, detail %q", where, ev.Detail)
				}
				finish()
			case durabletype.EventRetrying:
				if ev.DueAt.Before(ev.At) {
					bad("%s: retry due at %s, before %s", where, ev.DueAt, ev.At)
				}
				if !simRescued(ev.Detail) {
					l.ran = append(l.ran, ev.Attempt)
				}
				l.phase, l.due = simBackoff, ev.DueAt
			case durabletype.EventFailed:
				if !simRescued(ev.Detail) {
					l.ran = append(l.ran, ev.Attempt)
				}
				if !onFailure && failed == "" {
					failed = ev.Step
				}
				finish()
			case durabletype.EventQueued:
				if ev.Attempt != l.attempt-1 || ev.Detail != "released by its worker" {
					bad("%s: re-queued while running (detail %q)", where, ev.Detail)
				}
				l.phase, l.attempt = simQueued, ev.Attempt
			case durabletype.EventLost:
				if !simRescued(ev.Detail) {
					bad("%s: lost, detail %q", where, ev.Detail)
				}
				l.phase = simLostPhase
			case durabletype.EventCancelled:
				if failed == "" && !onFailure {
					bad("%s: cancelled although the run did not fail", where)
				}
				finish()
			default:
				wrong()
			}
		case simLostPhase:
			// A lost attempt spends nothing: the task is queued again at
			// once under the attempt before it, or fails as a poison step
			// (which the plan's lost limit rules out), or is cancelled
			// with its run.
			switch ev.Type {
			case durabletype.EventQueued:
				if ev.Attempt != l.attempt-1 || ev.Detail != "" {
					bad("%s: re-queued after a lost attempt with attempt %d, detail %q", where, ev.Attempt, ev.Detail)
				}
				l.phase, l.attempt = simQueued, ev.Attempt
			case durabletype.EventFailed:
				bad("%s: failed as a poison step: %s", where, ev.Detail)
				finish()
			case durabletype.EventCancelled:
				if failed == "" && !onFailure {
					bad("%s: cancelled although the run did not fail", where)
				}
				finish()
			default:
				wrong()
			}
		case simBackoff:
			switch ev.Type {
			case durabletype.EventQueued:
				if ev.Attempt != l.attempt || ev.At.Before(l.due) || ev.Detail != "" {
					bad("%s: queued at %s (detail %q), retry due at %s", where, ev.At, ev.Detail, l.due)
				}
				l.phase = simQueued
			case durabletype.EventCancelled:
				if failed == "" {
					bad("%s: cancelled although the run did not fail", where)
				}
				finish()
			default:
				wrong()
			}
		case simSleeping:
			switch ev.Type {
			case durabletype.EventWoken:
				if ev.At.Before(l.due) || ev.Attempt != 0 {
					bad("%s: woken at %s, due at %s", where, ev.At, l.due)
				}
				finish()
			case durabletype.EventCancelled:
				if failed == "" {
					bad("%s: cancelled although the run did not fail", where)
				}
				finish()
			default:
				wrong()
			}
		case simDone:
			bad("%s: after the step's terminal %s event", where, l.final)
		}
	}
	return logs
}

// simStateOf is the task state a terminal event leaves.
var simStateOf = map[durabletype.EventType]durabletype.TaskState{
	durabletype.EventCompleted: durabletype.TaskCompleted,
	durabletype.EventWoken:     durabletype.TaskCompleted,
	durabletype.EventSkipped:   durabletype.TaskSkipped,
	durabletype.EventFailed:    durabletype.TaskFailed,
	durabletype.EventCancelled: durabletype.TaskCancelled,
}

// simCheckRun checks one run against its expected end, its log against the
// state machine, and its executions against its log.
func simCheckRun(spec simRunSpec, res *durable.RunResult, evs []durabletype.Event, execs, effects map[simExecKey]int, st *simSeedStats) []string {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	shape := spec.shape()
	wantStatus, wants := spec.want()

	if res.Status != wantStatus {
		bad("status %s, want %s (error: %v)", res.Status, wantStatus, res.Err)
	}
	if !res.Done() {
		bad("not settled")
	}
	if wantStatus == durabletype.RunFailed {
		var re *durable.RunError
		if !errors.As(res.Err, &re) || re.Step != "flaky" || re.Message != simRefusal(spec.in) {
			bad("run error %v, want step flaky failing with %q", res.Err, simRefusal(spec.in))
		}
	}
	var names, wantNames []string
	for _, s := range res.Steps {
		names = append(names, s.Name)
	}
	for _, sp := range shape {
		wantNames = append(wantNames, sp.name)
	}
	if _, ok := wants[durabletype.OnFailureTask]; ok {
		wantNames = append(wantNames, durabletype.OnFailureTask)
	}
	if !slices.Equal(names, wantNames) {
		bad("steps %v, want %v", names, wantNames)
	}

	logs := simReplayLog(res.ID, evs, shape, bad)
	for _, s := range res.Steps {
		l := logs[s.Name]
		if !s.State.Terminal() {
			bad("step %s stuck in %s", s.Name, s.State)
		}
		if l == nil {
			bad("step %s has no events", s.Name)
			continue
		}
		if l.phase != simDone {
			bad("step %s: log ends in phase %s, without a terminal event", s.Name, l.phase)
		} else if simStateOf[l.final] != s.State {
			bad("step %s is %s but its terminal event is %s", s.Name, s.State, l.final)
		}
		if s.Attempts != l.attempt {
			bad("step %s: %d attempts, its log says %d", s.Name, s.Attempts, l.attempt)
		}
		w, ok := wants[s.Name]
		if !ok {
			continue
		}
		if s.State != w.state {
			bad("step %s is %s, want %s", s.Name, s.State, w.state)
		}
		if w.output != nil && s.State == durabletype.TaskCompleted {
			want, _ := json.Marshal(w.output)
			if !bytes.Equal(s.Output, want) {
				bad("step %s output %s, want %s", s.Name, s.Output, want)
			}
		}
	}
	if n := len(evs); n > 0 && res.Done() && !res.FinishedAt.Equal(evs[n-1].At) {
		bad("settled at %s, but its last event is at %s", res.FinishedAt, evs[n-1].At)
	}

	// Executions: every outcome of step code was produced by an execution
	// of that attempt, and every execution was of a claimed attempt.
	perStep := map[string]int{}
	for k, n := range execs {
		perStep[k.step] += n
		st.executions += n
		if l := logs[k.step]; l == nil || l.started[k.attempt] == 0 {
			bad("step %s: code ran %d time(s) for attempt %d, which the log never started", k.step, n, k.attempt)
		}
	}
	for name, l := range logs {
		for _, a := range l.ran {
			if execs[simExecKey{res.ID, name, a}] == 0 {
				bad("step %s: attempt %d recorded an outcome of the step's code, which never ran for it", name, a)
			}
		}
		if perStep[name] < len(l.ran) {
			bad("step %s: %d executions for %d outcomes of its code", name, perStep[name], len(l.ran))
		}
	}

	// TxSteps: the effect of exactly one attempt ran, the one whose
	// outcome completed the step, once; none if the step did not complete.
	for _, sp := range shape {
		if !sp.tx {
			continue
		}
		var step *durable.StepResult
		for i := range res.Steps {
			if res.Steps[i].Name == sp.name {
				step = &res.Steps[i]
			}
		}
		if step == nil {
			continue // reported above
		}
		total := 0
		var ran []string
		for k, n := range effects {
			if k.step == sp.name {
				total += n
				ran = append(ran, fmt.Sprintf("attempt %d ×%d", k.attempt, n))
			}
		}
		slices.Sort(ran)
		st.txSteps++
		st.txEffects += total
		st.txRolledBack += perStep[sp.name] - total
		switch {
		case step.State == durabletype.TaskCompleted:
			if total != 1 || effects[simExecKey{res.ID, sp.name, step.Attempts}] != 1 {
				bad("TxStep %s completed on attempt %d, but its effect ran %d time(s) (%v), want once, for that attempt", sp.name, step.Attempts, total, ran)
			}
		case total != 0:
			bad("TxStep %s is %s, but its effect ran %d time(s) (%v), want none", sp.name, step.State, total, ran)
		}
	}

	st.runs++
	if res.Status == durabletype.RunFailed {
		st.failedRuns++
	}
	for _, ev := range evs {
		switch ev.Type {
		case durabletype.EventStarted:
			st.attempts++
		case durabletype.EventLost:
			st.rescues++
		}
	}
	return probs
}

// simCheckFunc checks a run of a function (sim-f, or its child sim-f-kid)
// with input in: settled COMPLETED with the function's output; its body
// then its calls' records, in order, as the store names them (items
// "~main[seq:name]"); each call COMPLETED with its output, a step's by
// the attempt that succeeds (simCallAttempt); a causally ordered log in
// which the body's events follow its claims and each record's events say
// that its call completed exactly once (a step's after one RETRYING event
// per failed attempt); every execution of the body of a claimed attempt,
// the attempt that completed it among them; every recorded output of a step backed by an execution of that attempt,
// and no execution of a later one; and the DoTx's effect run once, by the
// attempt recorded.
func simCheckFunc(workflow string, in simInput, res *durable.RunResult, evs []durabletype.Event, tasks []*store.Task, execs, effects map[simExecKey]int, st *simSeedStats) []string {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	calls, output := simFuncCalls(workflow, in)

	if res.Workflow != workflow {
		bad("workflow %s, want %s", res.Workflow, workflow)
	}
	if res.Status != durabletype.RunCompleted || !res.Done() {
		bad("status %s (settled: %v), want COMPLETED (error: %v)", res.Status, res.Done(), res.Err)
	}
	names, taskNames := []string{durable.FuncBody}, []string{durable.FuncBody}
	display := map[string]simCallSpec{}
	for k, c := range calls {
		d := fmt.Sprintf("%s#%d", c.name, k)
		names = append(names, d)
		taskNames = append(taskNames, dag.RecordName(durable.FuncBody, k, c.name))
		display[d] = c
	}
	var gotNames, gotTasks []string
	for _, s := range res.Steps {
		gotNames = append(gotNames, s.Name)
	}
	if !slices.Equal(gotNames, names) {
		bad("steps %v, want the body and its records %v", gotNames, names)
	}
	for k, t := range tasks {
		gotTasks = append(gotTasks, t.Name)
		if k == 0 {
			continue
		}
		body, seq, call, ok := dag.ParseRecord(t.Name)
		if !ok || body != durable.FuncBody || seq != k-1 || t.Item != seq || k > len(calls) || call != calls[k-1].name {
			bad("task %d %q is not the record of call %d", k, t.Name, k-1)
		}
	}
	if !slices.Equal(gotTasks, taskNames) {
		bad("tasks %v, want %v", gotTasks, taskNames)
	}

	// Outputs and states, as Get reports them.
	recorded := map[string]int{} // a step's recorded attempt, by call name
	for _, s := range res.Steps {
		if s.Name == durable.FuncBody {
			want, _ := json.Marshal(output)
			if s.State != durabletype.TaskCompleted || !bytes.Equal(s.Output, want) {
				bad("body %s with output %s, want COMPLETED with %s", s.State, s.Output, want)
			}
			continue
		}
		c, ok := display[s.Name]
		if !ok {
			continue // reported above
		}
		if s.Kind != c.kind || s.State != durabletype.TaskCompleted {
			bad("call %s: %s %s, want %s COMPLETED", s.Name, s.Kind, s.State, c.kind)
			continue
		}
		if c.output != nil {
			want, _ := json.Marshal(c.output)
			if !bytes.Equal(s.Output, want) {
				bad("call %s: output %s, want %s", s.Name, s.Output, want)
			}
		}
		if c.kind == durabletype.KindStep {
			recorded[c.name] = s.Attempts
			if want := simCallAttempt(in, c.name, c.tx); s.Attempts != want {
				bad("call %s: completed by attempt %d, want %d", s.Name, s.Attempts, want)
			}
		}
		if c.kind == durabletype.KindChild && s.ChildRunID == uuid.Nil {
			bad("call %s: no child run", s.Name)
		}
	}
	if n := len(evs); n > 0 && res.Done() && !res.FinishedAt.Equal(evs[n-1].At) {
		bad("settled at %s, but its last event is at %s", res.FinishedAt, evs[n-1].At)
	}

	// The log: in order; the body's events follow its claims; each
	// record's events are those of its call completing once.
	byName := map[string][]durabletype.Event{}
	for k, ev := range evs {
		where := fmt.Sprintf("event %d (id %d, %s %s attempt %d)", k, ev.ID, ev.Step, ev.Type, ev.Attempt)
		if k > 0 {
			prev := evs[k-1]
			if ev.ID <= prev.ID {
				bad("%s: id not after the previous event's %d", where, prev.ID)
			}
			if ev.At.Before(prev.At) {
				bad("%s: at %s, before the previous event (%s)", where, ev.At.Format(time.StampMicro), prev.At.Format(time.StampMicro))
			}
		}
		if ev.RunID != res.ID {
			bad("%s: belongs to run %s", where, ev.RunID)
		}
		if _, ok := display[ev.Step]; !ok && ev.Step != durable.FuncBody {
			bad("%s: unknown step", where)
			continue
		}
		byName[ev.Step] = append(byName[ev.Step], ev)
	}
	started := map[int]int{} // the body's STARTED events by attempt
	running, done := false, false
	completedBy := 0 // the body's attempt that completed it
	for _, ev := range byName[durable.FuncBody] {
		where := fmt.Sprintf("body event %d %s attempt %d %q", ev.ID, ev.Type, ev.Attempt, ev.Detail)
		if done {
			bad("%s: after the body's COMPLETED", where)
			continue
		}
		switch ev.Type {
		case durabletype.EventStarted:
			if running {
				bad("%s: started while running", where)
			}
			running = true
			started[ev.Attempt]++
		case durabletype.EventQueued:
			running = false
		case durabletype.EventSleeping, durabletype.EventWaiting, durabletype.EventLost:
			if !running {
				bad("%s: not running", where)
			}
			if ev.Type == durabletype.EventLost {
				st.rescues++
			}
			running = false
		case durabletype.EventCompleted:
			if !running {
				bad("%s: not running", where)
			}
			done, completedBy = true, ev.Attempt
		default:
			bad("%s: not an event of a function's body that completes", where)
		}
	}
	if !done {
		bad("the body has no COMPLETED event")
	}
	for k, c := range calls {
		d := fmt.Sprintf("%s#%d", c.name, k)
		type step struct {
			typ     durabletype.EventType
			attempt int
		}
		var got, want []step
		completed := 0
		for _, ev := range byName[d] {
			got = append(got, step{ev.Type, ev.Attempt})
			if ev.Type == durabletype.EventCompleted || ev.Type == durabletype.EventWoken {
				completed++
			}
		}
		switch c.kind {
		case durabletype.KindStep:
			a := simCallAttempt(in, c.name, c.tx)
			for n := 1; n < a; n++ {
				want = append(want, step{durabletype.EventRetrying, n})
			}
			want = append(want, step{durabletype.EventCompleted, a})
		case durabletype.KindSleep:
			want = []step{{durabletype.EventSleeping, 0}, {durabletype.EventWoken, 0}}
		default:
			want = []step{{durabletype.EventWaiting, 0}, {durabletype.EventCompleted, 0}}
		}
		if completed != 1 {
			bad("call %s: completed %d times in the log, want exactly once", d, completed)
		}
		if !slices.Equal(got, want) {
			bad("call %s: events %v, want %v", d, got, want)
		}
	}

	// Executions: the body's of claimed attempts; a step's recorded output
	// computed by an execution of its attempt, none of a later attempt.
	for k, n := range execs {
		if k.step == durable.FuncBody {
			st.bodyExecs += n
			if started[k.attempt] == 0 {
				bad("body: ran %d time(s) for attempt %d, which the log never started", n, k.attempt)
			}
			continue
		}
		st.executions += n
		if a, ok := recorded[k.step]; !ok {
			bad("call %s: its code ran %d time(s) for attempt %d, and it recorded no step", k.step, n, k.attempt)
		} else if k.attempt > a {
			bad("call %s: its code ran %d time(s) for attempt %d, after attempt %d completed it", k.step, n, k.attempt, a)
		}
	}
	if done && execs[simExecKey{res.ID, durable.FuncBody, completedBy}] == 0 {
		bad("body: attempt %d completed it, but the body never ran for it", completedBy)
	}
	for name, a := range recorded {
		if execs[simExecKey{res.ID, name, a}] == 0 {
			bad("call %s: attempt %d recorded an output that no execution computed", name, a)
		}
	}

	// The DoTx: the effect of the attempt recorded, once; no other.
	for _, c := range calls {
		if !c.tx {
			continue
		}
		total := 0
		var ran []string
		for k, n := range effects {
			if k.step == c.name {
				total += n
				ran = append(ran, fmt.Sprintf("attempt %d ×%d", k.attempt, n))
			}
		}
		slices.Sort(ran)
		st.txSteps++
		st.txEffects += total
		n := 0
		for k, x := range execs {
			if k.step == c.name {
				n += x
			}
		}
		st.txRolledBack += n - total
		if a, ok := recorded[c.name]; !ok || total != 1 || effects[simExecKey{res.ID, c.name, a}] != 1 {
			bad("DoTx %s completed on attempt %d, but its effect ran %d time(s) (%v), want once, for that attempt", c.name, a, total, ran)
		}
	}

	st.runs++
	st.funcRuns++
	for _, ev := range evs {
		if ev.Type == durabletype.EventStarted {
			st.attempts++
		}
	}
	return probs
}

func simDump(res *durable.RunResult, evs []durabletype.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  status %s, created %s, finished %s\n", res.Status, res.CreatedAt.Format(time.StampMicro), res.FinishedAt.Format(time.StampMicro))
	for _, s := range res.Steps {
		fmt.Fprintf(&b, "  step %-12s %-9s attempts %d output %s error %q\n", s.Name, s.State, s.Attempts, s.Output, s.Error)
	}
	for _, ev := range evs {
		fmt.Fprintf(&b, "  %6d %s %-12s %-9s attempt %d", ev.ID, ev.At.Format(time.StampMicro), ev.Step, ev.Type, ev.Attempt)
		if ev.Detail != "" {
			fmt.Fprintf(&b, " %q", ev.Detail)
		}
		if !ev.DueAt.IsZero() {
			fmt.Fprintf(&b, " due %s", ev.DueAt.Format(time.StampMicro))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Statistics, to see that the faults actually happen (go test -v).

type simSeedStats struct {
	plan       *simPlan
	elapsed    time.Duration
	runs       int
	failedRuns int
	attempts   int
	executions int
	rescues    int
	// TxSteps checked, their effects run, and executions whose effect was
	// rolled back.
	txSteps, txEffects, txRolledBack int
	// Runs of functions (sim-f and its child runs), and executions of
	// their bodies.
	funcRuns, bodyExecs int
	faults              []simFaultStats
}

func (s *simSeedStats) String() string {
	var f simFaultStats
	partitioned := ""
	for i, x := range s.faults {
		f.add(&x)
		if x.Partitioned {
			partitioned = simWorker(i)
			if x.PartitionedLeading {
				partitioned += " (leader)"
			}
		}
	}
	if partitioned == "" {
		partitioned = "none"
	}
	return fmt.Sprintf("%d runs (%d failed as planned, %d of functions: %d executions of their bodies) settled in %s; %d attempts, %d executions, %d rescues; TxSteps %d, effects %d, rolled back %d; partitioned: %s; %s",
		s.runs, s.failedRuns, s.funcRuns, s.bodyExecs, s.elapsed, s.attempts, s.executions, s.rescues, s.txSteps, s.txEffects, s.txRolledBack, partitioned, f.String())
}

func (f *simFaultStats) add(x *simFaultStats) {
	for op := range simNumOps {
		f.Before[op] += x.Before[op]
		f.After[op] += x.After[op]
	}
	f.HiddenClaims += x.HiddenClaims
	f.Replays += x.Replays
	f.LateReplays += x.LateReplays
	f.HeartbeatDelays += x.HeartbeatDelays
	f.Applied += x.Applied
	f.Duplicate += x.Duplicate
	f.Stale += x.Stale
	f.ReplayDuplicate += x.ReplayDuplicate
	f.ReplayStale += x.ReplayStale
	f.Checkpoints += x.Checkpoints
	f.Suspends += x.Suspends
	f.ReplayedRecords += x.ReplayedRecords
	f.TxBeginFailed += x.TxBeginFailed
	f.TxCommitFailed += x.TxCommitFailed
	f.TxNotRecorded += x.TxNotRecorded
	f.TxApplied += x.TxApplied
	f.TxDuplicate += x.TxDuplicate
	f.TxStale += x.TxStale
	f.LeaderTerms += x.LeaderTerms
}

func (f *simFaultStats) String() string {
	var b strings.Builder
	b.WriteString("injected errors (before/after):")
	for op := range simNumOps {
		fmt.Fprintf(&b, " %s %d/%d", simOpNames[op], f.Before[op], f.After[op])
	}
	fmt.Fprintf(&b, "; hidden claims %d; outcomes applied %d, duplicate %d, stale %d; replays %d at once + %d later (duplicate %d, stale %d); heartbeats delayed %d; leader terms %d",
		f.HiddenClaims, f.Applied, f.Duplicate, f.Stale, f.Replays, f.LateReplays, f.ReplayDuplicate, f.ReplayStale, f.HeartbeatDelays, f.LeaderTerms)
	fmt.Fprintf(&b, "; functions' outcomes applied: checkpoints %d, suspensions %d; replays of them %d",
		f.Checkpoints, f.Suspends, f.ReplayedRecords)
	fmt.Fprintf(&b, "; FinishTx: begin failed %d, commit failed %d, not recorded (step failed) %d, applied %d, duplicate %d, stale %d",
		f.TxBeginFailed, f.TxCommitFailed, f.TxNotRecorded, f.TxApplied, f.TxDuplicate, f.TxStale)
	return b.String()
}

type simTotals struct {
	seeds, runs, failedRuns, attempts, executions, rescues int
	funcRuns, bodyExecs                                    int
	txSteps, txEffects, txRolledBack                       int
	partitions, leaderPartitions                           int
	maxElapsed                                             time.Duration
	faults                                                 simFaultStats
}

func (t *simTotals) add(s *simSeedStats) {
	t.seeds++
	t.runs += s.runs
	t.failedRuns += s.failedRuns
	t.attempts += s.attempts
	t.executions += s.executions
	t.rescues += s.rescues
	t.funcRuns += s.funcRuns
	t.bodyExecs += s.bodyExecs
	t.txSteps += s.txSteps
	t.txEffects += s.txEffects
	t.txRolledBack += s.txRolledBack
	t.maxElapsed = max(t.maxElapsed, s.elapsed)
	for i := range s.faults {
		x := &s.faults[i]
		t.faults.add(x)
		if x.Partitioned {
			t.partitions++
			if x.PartitionedLeading {
				t.leaderPartitions++
			}
		}
	}
}

func (t *simTotals) String() string {
	return fmt.Sprintf("%d runs (%d failed as planned, %d of functions: %d executions of their bodies), %d attempts, %d executions, %d rescues; TxSteps and DoTx calls %d, effects %d, rolled back %d; %d partitions (%d of the leader); longest seed %s of virtual time; %s",
		t.runs, t.failedRuns, t.funcRuns, t.bodyExecs, t.attempts, t.executions, t.rescues, t.txSteps, t.txEffects, t.txRolledBack, t.partitions, t.leaderPartitions, t.maxElapsed, t.faults.String())
}
