package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/store"
)

// ModelSteps is the number of operations Model applies.
const ModelSteps = 150

// Model applies one random sequence of operations, derived from seed,
// identically to two fresh stores and requires the same observable state
// after every step: the results of each call, and every run with its tasks
// and events (event IDs aside; times compared with Equal). Operations cover
// creating runs of small random shapes (sleeps, retries with backoff,
// on-failure handlers, several tenants and workflows), claiming with random
// limits and tenant caps, finishing with every outcome kind (stale and
// duplicate outcomes included), firing timers, rescuing, heartbeating and
// advancing the clock.
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
	runs []uuid.UUID
	// claims holds every claim seen, current or not, to replay outcomes.
	claims []store.TaskRef
	log    []string
	cur    string // the operation being applied
}

var (
	modelTenants   = []string{"t-a", "t-b", "t-c", "t-d"}
	modelWorkflows = []string{"wf1", "wf2"}
	modelWorkers   = []string{"w1", "w2", "w3"}
)

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
	case k < 80:
		return m.rescue()
	case k < 87:
		return m.heartbeat()
	default:
		d := time.Duration(m.rng.IntN(3000))*time.Millisecond + time.Duration(m.rng.IntN(1000))
		m.now = m.now.Add(d)
		return fmt.Sprintf("advance %s", d)
	}
}

func (m *model) policy() store.RetryPolicy {
	p := store.RetryPolicy{MaxAttempts: 1 + m.rng.IntN(3), Factor: 1}
	if m.rng.IntN(2) == 0 {
		p.InitialDelay = time.Duration(1+m.rng.IntN(3)) * time.Second
		p.Factor = float64(1 + m.rng.IntN(2))
		if m.rng.IntN(3) == 0 {
			p.Jitter = 0.5
		}
	}
	return p
}

func (m *model) shape() *store.Shape {
	n := 1 + m.rng.IntN(5)
	sh := &store.Shape{}
	for i := range n {
		st := store.StepSpec{Name: fmt.Sprintf("s%d", i), Retry: m.policy()}
		for p := range i {
			if m.rng.IntN(3) == 0 {
				st.Parents = append(st.Parents, fmt.Sprintf("s%d", p))
			}
		}
		if m.rng.IntN(6) == 0 {
			st.Sleep = time.Duration(1+m.rng.IntN(4)) * time.Second
		}
		sh.Steps = append(sh.Steps, st)
	}
	if m.rng.IntN(3) == 0 {
		sh.OnFailure = &store.OnFailureSpec{Retry: m.policy()}
	}
	return sh
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
		for k, cr := range ra.Runs {
			if !cr.Duplicate {
				m.runs = append(m.runs, ids[k])
			}
		}
	}
	return fmt.Sprintf("create %d runs (err %v)", n, ea)
}

func (m *model) sameError(ea, eb error, what string) {
	m.t.Helper()
	if (ea == nil) != (eb == nil) || errors.Is(ea, store.ErrRunExists) != errors.Is(eb, store.ErrRunExists) {
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
	m.cur = fmt.Sprintf("claim %+v", *p)
	ca, err := m.a.ClaimTasks(ctx, p)
	require.NoError(m.t, err)
	cb, err := m.b.ClaimTasks(ctx, p)
	require.NoError(m.t, err)
	m.equal(normClaims(ca), normClaims(cb), "claims")
	for _, c := range ca {
		m.claims = append(m.claims, c.Ref())
	}
	return fmt.Sprintf("claim %s limit %d cap %d %v: %d", p.WorkerID, p.Limit, p.TenantLimit, p.Workflows, len(ca))
}

func (m *model) pickRefs(max int) []store.TaskRef {
	if len(m.claims) == 0 {
		return nil
	}
	n := 1 + m.rng.IntN(max)
	var refs []store.TaskRef
	for range n {
		// Favour recent claims, which are more likely current.
		k := len(m.claims) - 1 - m.rng.IntN(min(len(m.claims), 6))
		if m.rng.IntN(5) == 0 {
			k = m.rng.IntN(len(m.claims))
		}
		ref := m.claims[k]
		if m.rng.IntN(12) == 0 {
			ref.Token++ // a claim that never was
		}
		refs = append(refs, ref)
	}
	return refs
}

func (m *model) finish() string {
	refs := m.pickRefs(3)
	if len(refs) == 0 {
		return m.claim()
	}
	p := &store.FinishTasksParams{Now: m.now}
	for _, ref := range refs {
		o := store.Outcome{Task: ref, Rand: m.rng.Float64()}
		switch k := m.rng.IntN(10); {
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
	p := &store.HeartbeatParams{Now: m.now, WorkerID: modelWorkers[m.rng.IntN(len(modelWorkers))], Tasks: m.pickRefs(4)}
	ra, err := m.a.Heartbeat(ctx, p)
	require.NoError(m.t, err)
	rb, err := m.b.Heartbeat(ctx, p)
	require.NoError(m.t, err)
	m.equal(ra, rb, "heartbeat results")
	return fmt.Sprintf("heartbeat %s %d tasks: %d lost", p.WorkerID, len(p.Tasks), len(ra.Lost))
}

// compareRuns requires both stores to hold the same runs, tasks and events.
func (m *model) compareRuns() {
	m.t.Helper()
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
		c.Output = normBytes(c.Output)
		c.DueAt, c.StartedAt, c.FinishedAt = normTime(c.DueAt), normTime(c.StartedAt), normTime(c.FinishedAt)
		c.HeartbeatAt = normTime(c.HeartbeatAt)
		out[i] = c
	}
	return out
}

func normEvents(es []*store.Event) []store.Event {
	out := make([]store.Event, len(es))
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
		out[i] = n
	}
	return out
}
