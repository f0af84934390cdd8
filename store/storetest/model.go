package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// ModelSteps is the number of operations Model applies.
const ModelSteps = 150

// Model applies one random sequence of operations, derived from seed,
// identically to two fresh stores and requires the same observable state
// after every step: the results of each call, and every run with its tasks
// and events (event IDs aside; times compared with Equal). Operations cover
// creating runs of small random shapes (sleeps, retries with backoff,
// on-failure handlers, steps that wait for events and signals, child steps,
// map steps, several tenants and workflows), claiming with random limits
// and tenant caps, finishing with every outcome kind (stale and duplicate
// outcomes included), sending events and signals, cancelling and replaying
// runs, firing timers, rescuing, heartbeating and advancing the clock.
//
// Use it to hold a store to a reference one: Model(t, memstore.New(), s, seed).
func Model(t *testing.T, a, b store.Store, seed int64) {
	ModelN(t, a, b, seed, ModelSteps)
}

// ModelN is Model with a chosen number of steps.
func ModelN(t *testing.T, a, b store.Store, seed int64, steps int) {
	t.Helper()
	m := &model{
		t: t, a: a, b: b,
		rng: rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15)),
		now: T0,
	}
	for step := range steps {
		op := m.step()
		m.log = append(m.log, fmt.Sprintf("%3d %s", step, op))
		m.compareRuns()
	}
}

type model struct {
	t    *testing.T
	a, b store.Store
	rng  *rand.Rand
	now  time.Time
	runs []uuid.UUID // every run, child runs included
	// claims holds every claim seen, current or not, to replay outcomes.
	claims []claimRef
	log    []string
	cur    string // the operation being applied
}

// claimRef is a claim and the kind of its task.
type claimRef struct {
	ref  store.TaskRef
	kind durabletype.TaskKind
}

var (
	modelTenants   = []string{"t-a", "t-b", "t-c", "t-d"}
	modelWorkflows = []string{"wf1", "wf2", modelChild}
	modelWorkers   = []string{"w1", "w2", "w3"}
	modelKeys      = []string{"k0", "k1", "k2"}
	// modelVersions are the versions of the model's runs: created at the
	// first two, moved to any.
	modelVersions = []string{"1", "2", "3"}
)

// modelChild is the workflow of the model's child runs.
const modelChild = "wfc"

func (m *model) fail(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("model: %s\nin: %s\nops so far:\n%s", fmt.Sprintf(format, args...), m.cur, strings.Join(m.log, "\n"))
}

func (m *model) equal(want, got any, what string) {
	m.t.Helper()
	if !assertEqual(want, got) {
		m.fail("%s differ:\nA: %#v\nB: %#v", what, want, got)
	}
}

// assertEqual compares like require.Equal without failing the test, so
// that a difference is reported with the operation log.
func assertEqual(want, got any) bool {
	ft := &recorder{}
	assert.Equal(ft, want, got)
	return !ft.failed
}

type recorder struct{ failed bool }

func (r *recorder) Errorf(string, ...any) { r.failed = true }

func (m *model) step() string {
	switch k := m.rng.IntN(100); {
	case k < 15 || len(m.runs) == 0:
		return m.create()
	case k < 40:
		return m.claim()
	case k < 65:
		return m.finish()
	case k < 73:
		return m.fire()
	case k < 78:
		return m.rescue()
	case k < 83:
		return m.heartbeat()
	case k < 86:
		return m.send()
	case k < 88:
		return m.signal()
	case k < 90:
		return m.cancel()
	case k < 92:
		return m.replay()
	case k < 95:
		return m.upgrade()
	default:
		d := time.Duration(m.rng.IntN(3000))*time.Millisecond + time.Duration(m.rng.IntN(1000))
		m.now = m.now.Add(d)
		return fmt.Sprintf("advance %s", d)
	}
}

func (m *model) policy() durabletype.RetryPolicy {
	p := durabletype.RetryPolicy{MaxAttempts: 1 + m.rng.IntN(3), Factor: 1}
	if m.rng.IntN(2) == 0 {
		p.InitialDelay = time.Duration(1+m.rng.IntN(3)) * time.Second
		p.Factor = float64(1 + m.rng.IntN(2))
		if m.rng.IntN(3) == 0 {
			p.Jitter = 0.5
		}
	}
	return p
}

func (m *model) shape() *durabletype.Shape {
	n := 1 + m.rng.IntN(5)
	sh := &durabletype.Shape{Version: modelVersions[m.rng.IntN(2)]}
	if m.rng.IntN(6) == 0 { // a durable function
		sh.Steps = []durabletype.StepSpec{{Name: "main", Func: &durabletype.FuncSpec{}, Retry: m.policy()}}
		return sh
	}
	for i := range n {
		st := durabletype.StepSpec{Name: fmt.Sprintf("s%d", i), Retry: m.policy()}
		for p := range i {
			if m.rng.IntN(3) == 0 {
				st.Parents = append(st.Parents, fmt.Sprintf("s%d", p))
			}
		}
		switch m.rng.IntN(12) {
		case 0:
			st.Sleep = time.Duration(1+m.rng.IntN(4)) * time.Second
		case 1, 2:
			w := &durabletype.WaitSpec{}
			if m.rng.IntN(3) == 0 {
				w.Signal = "sig"
			} else if m.rng.IntN(2) == 0 {
				w.Lookback = time.Duration(1+m.rng.IntN(4)) * time.Second
			}
			if m.rng.IntN(2) == 0 {
				w.Timeout = time.Duration(1+m.rng.IntN(4)) * time.Second
				w.SkipOnTimeout = m.rng.IntN(2) == 0
			}
			st.Wait = w
		case 3:
			st.Child = &durabletype.ChildSpec{Workflow: modelChild, Result: "c1"}
		case 4, 5, 6:
			if i > 0 {
				if len(st.Parents) == 0 {
					st.Parents = []string{fmt.Sprintf("s%d", m.rng.IntN(i))}
				}
				st.Map = &durabletype.MapSpec{Over: st.Parents[0]}
			} else {
				st.Map = &durabletype.MapSpec{} // over the run's input: a root map step
			}
		}
		sh.Steps = append(sh.Steps, st)
	}
	if m.rng.IntN(3) == 0 {
		sh.OnFailure = &durabletype.OnFailureSpec{Retry: m.policy()}
	}
	return sh
}

// records are calls a function's body reports: names are given by number
// (a worker that mixes histories is the conformance suite's business).
func (m *model) records() []store.Record {
	var out []store.Record
	for range m.rng.IntN(3) {
		seq := m.rng.IntN(4)
		r := store.Record{Seq: seq, Name: fmt.Sprintf("c%d", seq), Attempt: 1 + m.rng.IntN(2)}
		switch seq {
		case 0:
			r.Kind = durabletype.KindStep
			switch m.rng.IntN(3) {
			case 0:
				r.State, r.Output = durabletype.TaskCompleted, m.bytes()
			case 1:
				r.State, r.Error = durabletype.TaskFailed, "no"
			default:
				r.State, r.Error, r.After = durabletype.TaskPending, "again", time.Duration(1+m.rng.IntN(3))*time.Second
			}
		case 1:
			r.Kind, r.After = durabletype.KindSleep, time.Duration(1+m.rng.IntN(4))*time.Second
		case 2:
			r.Kind, r.Key = durabletype.KindEvent, modelKeys[m.rng.IntN(len(modelKeys))]
			if m.rng.IntN(3) == 0 {
				r.Key, r.Signal = "sig", true
			}
			if m.rng.IntN(2) == 0 {
				r.Timeout = time.Duration(1+m.rng.IntN(4)) * time.Second
			}
		default:
			r.Kind, r.Child, r.Result = durabletype.KindChild, m.childRun(), "c1"
		}
		out = append(out, r)
	}
	return out
}

// childRun is the run a child step asks to start.
func (m *model) childRun() *store.NewRun {
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{
		{Name: "c0", Retry: m.policy()},
		{Name: "c1", Parents: []string{"c0"}, Retry: m.policy()},
	}}
	return &store.NewRun{Workflow: modelChild, Input: m.bytes(), Shape: sh}
}

func (m *model) uuid() uuid.UUID {
	var id uuid.UUID
	for i := range id {
		id[i] = byte(m.rng.UintN(256))
	}
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

func (m *model) bytes() []byte {
	if m.rng.IntN(4) == 0 {
		return nil
	}
	return fmt.Appendf(nil, `{"v":%d}`, m.rng.IntN(1000))
}

func (m *model) create() string {
	n := 1 + m.rng.IntN(3)
	p := &store.CreateRunsParams{Now: m.now}
	var ids []uuid.UUID
	for range n {
		nr := store.NewRun{
			ID:       m.uuid(),
			Workflow: modelWorkflows[m.rng.IntN(len(modelWorkflows))],
			Tenant:   modelTenants[m.rng.IntN(len(modelTenants))],
			Input:    m.bytes(),
			Shape:    m.shape(),
		}
		if len(m.runs) > 0 && m.rng.IntN(15) == 0 {
			// An existing run: a duplicate when its workflow and tenant
			// match, else the batch fails.
			nr.ID = m.runs[m.rng.IntN(len(m.runs))]
		}
		p.Runs = append(p.Runs, nr)
		ids = append(ids, nr.ID)
	}
	ra, ea := m.a.CreateRuns(ctx, p)
	rb, eb := m.b.CreateRuns(ctx, p)
	m.sameError(ea, eb, "CreateRuns")
	if ea == nil {
		if !reflect.DeepEqual(ra, rb) {
			m.fail("CreateRuns results differ: A: %+v, B: %+v", ra, rb)
		}
		_ = ids
	}
	return fmt.Sprintf("create %d runs (err %v)", n, ea)
}

func (m *model) sameError(ea, eb error, what string) {
	m.t.Helper()
	if (ea == nil) != (eb == nil) || errors.Is(ea, durabletype.ErrRunExists) != errors.Is(eb, durabletype.ErrRunExists) {
		m.fail("%s errors differ: A: %v, B: %v", what, ea, eb)
	}
}

func (m *model) claim() string {
	p := &store.ClaimTasksParams{
		Now:      m.now,
		WorkerID: modelWorkers[m.rng.IntN(len(modelWorkers))],
		Limit:    1 + m.rng.IntN(4),
	}
	for _, wf := range modelWorkflows {
		if m.rng.IntN(4) != 0 {
			p.Workflows = append(p.Workflows, wf)
		}
	}
	if m.rng.IntN(3) == 0 {
		p.TenantLimit = 1 + m.rng.IntN(2)
	}
	if m.rng.IntN(2) == 0 { // the versions served, too
		p.Queues = []string{}
		for _, wf := range p.Workflows {
			for _, v := range append([]string{""}, modelVersions...) {
				if m.rng.IntN(2) == 0 {
					p.Queues = append(p.Queues, wf+"@"+v)
				}
			}
		}
	}
	m.cur = fmt.Sprintf("claim %+v", *p)
	ca, err := m.a.ClaimTasks(ctx, p)
	require.NoError(m.t, err)
	cb, err := m.b.ClaimTasks(ctx, p)
	require.NoError(m.t, err)
	m.equal(normClaims(ca), normClaims(cb), "claims")
	for _, c := range ca {
		m.claims = append(m.claims, claimRef{c.Ref(), c.Kind})
	}
	return fmt.Sprintf("claim %s limit %d cap %d %v: %d", p.WorkerID, p.Limit, p.TenantLimit, p.Workflows, len(ca))
}

func (m *model) pickRefs(max int) []claimRef {
	if len(m.claims) == 0 {
		return nil
	}
	n := 1 + m.rng.IntN(max)
	var refs []claimRef
	for range n {
		// Favour recent claims, which are more likely current.
		k := len(m.claims) - 1 - m.rng.IntN(min(len(m.claims), 6))
		if m.rng.IntN(5) == 0 {
			k = m.rng.IntN(len(m.claims))
		}
		c := m.claims[k]
		if m.rng.IntN(12) == 0 {
			c.ref.Token++ // a claim that never was
		}
		refs = append(refs, c)
	}
	return refs
}

func taskRefs(cs []claimRef) []store.TaskRef {
	out := make([]store.TaskRef, len(cs))
	for i, c := range cs {
		out[i] = c.ref
	}
	return out
}

func (m *model) finish() string {
	refs := m.pickRefs(3)
	if len(refs) == 0 {
		return m.claim()
	}
	p := &store.FinishTasksParams{Now: m.now}
	for _, c := range refs {
		o := store.Outcome{Task: c.ref, Rand: m.rng.Float64()}
		switch k := m.rng.IntN(10); {
		case k < 6 && c.kind == durabletype.KindFunc:
			o.Kind, o.Records = store.OutcomeCheckpoint, m.records()
			if k >= 3 {
				o.Kind = store.OutcomeSuspend
				for range 1 + m.rng.IntN(2) {
					o.Await = append(o.Await, m.rng.IntN(4))
				}
				for _, r := range o.Records {
					if r.Kind == durabletype.KindSleep || r.Kind == durabletype.KindEvent {
						o.Await = []int{r.Seq} // as a worker does (a bad worker's outcome is refused)
					}
				}
				o.AwaitAny = m.rng.IntN(2) == 0
			}
		case k < 5 && c.kind == durabletype.KindEvent:
			o.Kind, o.Key = store.OutcomeWait, modelKeys[m.rng.IntN(len(modelKeys))]
		case k < 5 && c.kind == durabletype.KindChild:
			o.Kind, o.Child = store.OutcomeSpawn, m.childRun()
		case k < 5 && c.kind == durabletype.KindMap:
			o.Kind = store.OutcomeFanOut
			for range m.rng.IntN(4) {
				o.Items = append(o.Items, fmt.Appendf(nil, "%d", m.rng.IntN(3)))
			}
		case k < 5:
			o.Kind, o.Output = store.OutcomeComplete, m.bytes()
		case k < 8:
			o.Kind, o.Error, o.Terminal = store.OutcomeFail, fmt.Sprintf("boom %d", m.rng.IntN(100)), m.rng.IntN(4) == 0
		case k < 9:
			o.Kind, o.Reason = store.OutcomeSkip, "condition"
		default:
			o.Kind = store.OutcomeRelease
		}
		p.Outcomes = append(p.Outcomes, o)
	}
	ra, err := m.a.FinishTasks(ctx, p)
	require.NoError(m.t, err)
	rb, err := m.b.FinishTasks(ctx, p)
	require.NoError(m.t, err)
	m.equal(ra, rb, "finish results")
	return fmt.Sprintf("finish %d outcomes: %v", len(p.Outcomes), ra)
}

func (m *model) send() string {
	p := &store.SendEventsParams{Now: m.now}
	for range 1 + m.rng.IntN(2) {
		p.Events = append(p.Events, store.EventMessage{Tenant: modelTenants[m.rng.IntN(len(modelTenants))],
			Key: modelKeys[m.rng.IntN(len(modelKeys))], Payload: m.bytes()})
	}
	ra, err := m.a.SendEvents(ctx, p)
	require.NoError(m.t, err)
	rb, err := m.b.SendEvents(ctx, p)
	require.NoError(m.t, err)
	m.equal(ra, rb, "send results")
	return fmt.Sprintf("send %d events: %v", len(p.Events), ra.Delivered)
}

func (m *model) pickRun() uuid.UUID {
	if len(m.runs) == 0 {
		return m.uuid()
	}
	return m.runs[m.rng.IntN(len(m.runs))]
}

func (m *model) signal() string {
	p := &store.SignalParams{Now: m.now, RunID: m.pickRun(), Name: "sig", Payload: m.bytes()}
	ra, ea := m.a.Signal(ctx, p)
	rb, eb := m.b.Signal(ctx, p)
	if (ea == nil) != (eb == nil) || errors.Is(ea, durabletype.ErrRunSettled) != errors.Is(eb, durabletype.ErrRunSettled) {
		m.fail("signal errors differ: A: %v, B: %v", ea, eb)
	}
	if ea == nil && eb == nil {
		m.equal(ra, rb, "signal results")
	}
	return fmt.Sprintf("signal %s: %v", p.RunID, ea)
}

func (m *model) cancel() string {
	p := &store.ActOnRunsParams{Now: m.now, Action: durabletype.ActionCancel, IDs: []uuid.UUID{m.pickRun()}, Reason: "model"}
	ra, err := m.a.ActOnRuns(ctx, p)
	require.NoError(m.t, err)
	rb, err := m.b.ActOnRuns(ctx, p)
	require.NoError(m.t, err)
	m.equal(ra, rb, "cancel results")
	return fmt.Sprintf("cancel %s: %v", p.IDs[0], ra[0].Err)
}

func (m *model) replay() string {
	p := &store.ActOnRunsParams{Now: m.now, Action: durabletype.ActionReplay, IDs: []uuid.UUID{m.pickRun()}}
	if m.rng.IntN(3) == 0 {
		p.FromStep = fmt.Sprintf("s%d", m.rng.IntN(3))
	}
	ra, err := m.a.ActOnRuns(ctx, p)
	require.NoError(m.t, err)
	rb, err := m.b.ActOnRuns(ctx, p)
	require.NoError(m.t, err)
	m.equal(ra, rb, "replay results")
	return fmt.Sprintf("replay %s from %q: %v", p.IDs[0], p.FromStep, ra[0].Err)
}

// upgrade moves a run to another version whose shape is the run's, less
// its retired steps, maybe less one step (its edges gone with it), maybe
// with a step added: the core accepts or refuses it, the same in both
// stores.
func (m *model) upgrade() string {
	id := m.pickRun()
	rec, err := m.a.GetRun(ctx, id)
	if err != nil {
		return fmt.Sprintf("upgrade %s: %v", id, err)
	}
	to := &durabletype.Shape{Version: modelVersions[m.rng.IntN(len(modelVersions))], OnFailure: rec.Shape.OnFailure}
	drop := ""
	if m.rng.IntN(3) == 0 && len(rec.Shape.Steps) > 1 {
		drop = rec.Shape.Steps[m.rng.IntN(len(rec.Shape.Steps))].Name
	}
	for _, st := range rec.Shape.Steps {
		if st.Retired || st.Name == drop {
			continue
		}
		var parents []string
		for _, p := range st.Parents {
			if p != drop {
				parents = append(parents, p)
			}
		}
		st.Parents = parents
		if st.Map != nil && st.Map.Over != "" && !slices.Contains(parents, st.Map.Over) {
			continue // its list is gone: drop it too
		}
		to.Steps = append(to.Steps, st)
	}
	if m.rng.IntN(2) == 0 && len(to.Steps) > 0 {
		add := durabletype.StepSpec{Name: fmt.Sprintf("n%d", m.rng.IntN(3)), Retry: m.policy(),
			Parents: []string{to.Steps[m.rng.IntN(len(to.Steps))].Name}}
		if !slices.ContainsFunc(to.Steps, func(s durabletype.StepSpec) bool { return s.Name == add.Name }) {
			to.Steps = append(to.Steps, add)
		}
	}
	p := &store.ActOnRunsParams{Now: m.now, Action: durabletype.ActionUpgrade, IDs: []uuid.UUID{id}, Version: rec.Version, To: to}
	if m.rng.IntN(4) == 0 {
		p.Version = modelVersions[m.rng.IntN(len(modelVersions))]
	}
	m.cur = fmt.Sprintf("upgrade %s from %q to %+v", id, p.Version, *to)
	ra, ea := m.a.ActOnRuns(ctx, p)
	rb, eb := m.b.ActOnRuns(ctx, p)
	if (ea == nil) != (eb == nil) {
		m.fail("upgrade errors differ: A: %v, B: %v", ea, eb)
	}
	if ea != nil {
		return fmt.Sprintf("upgrade %s to %s: %v", id, to.Version, ea)
	}
	m.equal(ra, rb, "upgrade results")
	return fmt.Sprintf("upgrade %s from %s to %s (dropped %q, %d steps): %v", id, p.Version, to.Version, drop, len(to.Steps), ra[0].Err)
}

func (m *model) fire() string {
	p := &store.FireTimersParams{Now: m.now, Limit: m.rng.IntN(4)}
	ra, err := m.a.FireTimers(ctx, p)
	require.NoError(m.t, err)
	rb, err := m.b.FireTimers(ctx, p)
	require.NoError(m.t, err)
	m.equal(ra, rb, "fire results")
	return fmt.Sprintf("fire limit %d: %+v", p.Limit, *ra)
}

func (m *model) rescue() string {
	p := &store.RescueTasksParams{
		Now:       m.now,
		DeadAfter: time.Duration(1+m.rng.IntN(8))*time.Second + time.Duration(m.rng.IntN(3))*time.Nanosecond,
		Limit:     m.rng.IntN(4),
		Rand:      m.rng.Float64(),
	}
	ra, err := m.a.RescueTasks(ctx, p)
	require.NoError(m.t, err)
	rb, err := m.b.RescueTasks(ctx, p)
	require.NoError(m.t, err)
	m.equal(ra, rb, "rescue results")
	return fmt.Sprintf("rescue dead after %s limit %d: %d", p.DeadAfter, p.Limit, len(ra.Rescued))
}

func (m *model) heartbeat() string {
	p := &store.HeartbeatParams{Now: m.now, WorkerID: modelWorkers[m.rng.IntN(len(modelWorkers))], Tasks: taskRefs(m.pickRefs(4))}
	ra, err := m.a.Heartbeat(ctx, p)
	require.NoError(m.t, err)
	rb, err := m.b.Heartbeat(ctx, p)
	require.NoError(m.t, err)
	m.equal(ra, rb, "heartbeat results")
	return fmt.Sprintf("heartbeat %s %d tasks: %d lost", p.WorkerID, len(p.Tasks), len(ra.Lost))
}

// compareRuns requires both stores to hold the same runs (as ListRuns lists
// them: the child runs too), tasks and events.
func (m *model) compareRuns() {
	m.t.Helper()
	la, lb := m.listAll(m.a), m.listAll(m.b)
	m.equal(la, lb, "run lists")
	m.runs = m.runs[:0]
	for _, r := range la {
		m.runs = append(m.runs, r.ID)
	}
	for _, id := range m.runs {
		ra, err := m.a.GetRun(ctx, id)
		require.NoError(m.t, err)
		rb, err := m.b.GetRun(ctx, id)
		require.NoError(m.t, err)
		m.equal(normRun(ra), normRun(rb), fmt.Sprintf("run %s", id))

		ta, err := m.a.ListTasks(ctx, id)
		require.NoError(m.t, err)
		tb, err := m.b.ListTasks(ctx, id)
		require.NoError(m.t, err)
		m.equal(normTasks(ta), normTasks(tb), fmt.Sprintf("tasks of run %s", id))

		ea, err := m.a.ListEvents(ctx, id)
		require.NoError(m.t, err)
		eb, err := m.b.ListEvents(ctx, id)
		require.NoError(m.t, err)
		m.equal(normEvents(ea), normEvents(eb), fmt.Sprintf("events of run %s", id))
	}
}

// listAll lists every run of s, newest first.
func (m *model) listAll(s store.Store) []durabletype.RunSummary {
	m.t.Helper()
	var out []durabletype.RunSummary
	var after *store.RunKey
	for {
		res, err := s.ListRuns(ctx, &store.ListRunsParams{After: after, Limit: 100})
		require.NoError(m.t, err)
		for _, r := range res.Runs {
			r.CreatedAt, r.FinishedAt = normTime(r.CreatedAt), normTime(r.FinishedAt)
			out = append(out, r)
		}
		if !res.More {
			return out
		}
		last := res.Runs[len(res.Runs)-1]
		after = &store.RunKey{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

// Normalisation: times in UTC (so that Equal times compare equal), empty
// byte slices as nil, event IDs dropped.

func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func normBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

func normRun(r *store.Run) store.Run {
	c := *r
	c.Input = normBytes(c.Input)
	c.CreatedAt, c.FinishedAt = normTime(c.CreatedAt), normTime(c.FinishedAt)
	return c
}

func normTasks(ts []*store.Task) []store.Task {
	out := make([]store.Task, len(ts))
	for i, t := range ts {
		c := *t
		c.Output, c.Input = normBytes(c.Output), normBytes(c.Input)
		c.DueAt, c.StartedAt, c.FinishedAt = normTime(c.DueAt), normTime(c.StartedAt), normTime(c.FinishedAt)
		c.HeartbeatAt = normTime(c.HeartbeatAt)
		out[i] = c
	}
	return out
}

func normEvents(es []*durabletype.Event) []durabletype.Event {
	out := make([]durabletype.Event, len(es))
	for i, e := range es {
		c := *e
		c.ID = 0
		c.At, c.DueAt = normTime(c.At), normTime(c.DueAt)
		out[i] = c
	}
	return out
}

func normClaims(cs []*store.ClaimedTask) []store.ClaimedTask {
	out := make([]store.ClaimedTask, len(cs))
	for i, c := range cs {
		n := *c
		n.Input = normBytes(n.Input)
		if len(n.ParentOutputs) > 0 {
			n.ParentOutputs = make(map[string][]byte, len(c.ParentOutputs))
			for k, v := range c.ParentOutputs {
				n.ParentOutputs[k] = normBytes(v)
			}
		} else {
			n.ParentOutputs = nil
		}
		if n.ParentItems != nil {
			n.ParentItems = make(map[string][][]byte, len(c.ParentItems))
			for k, items := range c.ParentItems {
				norm := make([][]byte, len(items))
				for j, it := range items {
					norm[j] = normBytes(it)
				}
				n.ParentItems[k] = norm
			}
		}
		out[i] = n
	}
	return out
}
