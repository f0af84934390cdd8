package completer

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStore records outcomes through answer, and notes every call.
type fakeStore struct {
	mu     sync.Mutex
	calls  [][]store.Outcome
	answer func(batch []store.Outcome) ([]store.FinishResult, error)
}

func (s *fakeStore) FinishTasks(ctx context.Context, p *store.FinishTasksParams) ([]store.FinishResult, error) {
	s.mu.Lock()
	s.calls = append(s.calls, slices.Clone(p.Outcomes))
	answer := s.answer
	s.mu.Unlock()
	if answer == nil {
		return applied(p.Outcomes), nil
	}
	return answer(p.Outcomes)
}

func (s *fakeStore) sizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, c := range s.calls {
		out = append(out, len(c))
	}
	return out
}

func applied(batch []store.Outcome) []store.FinishResult {
	return make([]store.FinishResult, len(batch))
}

// fakeSteps notes the outcomes forgotten; cancelled says which steps'
// runs were cancelled.
type fakeSteps struct {
	mu        sync.Mutex
	forgotten []store.TaskRef
	cancelled map[store.TaskRef]bool
	timedOut  map[store.TaskRef]bool
}

func (s *fakeSteps) Forget(batch []store.Outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range batch {
		s.forgotten = append(s.forgotten, o.Task)
	}
}

func (s *fakeSteps) WasCancelled(ref store.TaskRef) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancelled[ref]
}

func (s *fakeSteps) WasTimedOut(ref store.TaskRef) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.timedOut[ref]
}

// logs keeps the records logged.
type logs struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logs) Enabled(context.Context, slog.Level) bool { return true }
func (h *logs) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
	return nil
}
func (h *logs) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logs) WithGroup(string) slog.Handler      { return h }

func (h *logs) levels(msg string) []slog.Level {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Level
	for _, r := range h.records {
		if r.Message == msg {
			out = append(out, r.Level)
		}
	}
	return out
}

type bundle struct {
	store *fakeStore
	steps *fakeSteps
	logs  *logs
	c     *Completer[int]
	// metrics notes, per batch the store took, the metas; wakes counts
	// the wake-ups.
	mu      sync.Mutex
	metrics [][]int
	wakes   int
}

func setup(t *testing.T, batch int) *bundle {
	t.Helper()
	b := &bundle{store: &fakeStore{}, steps: &fakeSteps{cancelled: map[store.TaskRef]bool{}, timedOut: map[store.TaskRef]bool{}}, logs: &logs{}}
	b.c = New(Config[int]{
		Store: b.store, Steps: b.steps, Batch: batch, Queue: 100, Logger: slog.New(b.logs),
		Wake: func() { b.mu.Lock(); b.wakes++; b.mu.Unlock() },
		Metrics: func(batch []store.Outcome, meta []int, res []store.FinishResult) {
			require.Len(t, meta, len(batch))
			require.Len(t, res, len(batch))
			b.mu.Lock()
			b.metrics = append(b.metrics, slices.Clone(meta))
			b.mu.Unlock()
		},
	})
	return b
}

// outcome is the outcome of the i-th step of a run of its own, with meta i.
func outcome(i int) Message[int] {
	return Message[int]{Outcome: store.Outcome{Task: store.TaskRef{RunID: uuid.New(), Step: "s", Token: int64(i)}, Kind: store.OutcomeComplete}, Meta: i}
}

func (b *bundle) send(n int) []Message[int] {
	var out []Message[int]
	for i := range n {
		m := outcome(i)
		b.c.Send(m)
		out = append(out, m)
	}
	return out
}

func refs(ms []Message[int]) []store.TaskRef {
	var out []store.TaskRef
	for _, m := range ms {
		out = append(out, m.Outcome.Task)
	}
	return out
}

// Outcomes that piled up are recorded Batch at a time; each batch the
// store took wakes the claims, is counted with its metas, and its steps
// are forgotten.
func TestBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, 2)
		sent := b.send(5)
		require.NoError(t, b.c.Start(t.Context()))
		b.c.Stop()
		require.Equal(t, []int{2, 2, 1}, b.store.sizes())
		require.Equal(t, [][]int{{0, 1}, {2, 3}, {4}}, b.metrics)
		require.Equal(t, 3, b.wakes)
		require.Equal(t, refs(sent), b.steps.forgotten)
		lost, _ := b.c.Lost()
		require.Zero(t, lost)
	})
}

// Without metrics, no meta is kept and nothing is counted.
func TestNoMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &fakeStore{}
		c := New(Config[int]{Store: st, Steps: &fakeSteps{}, Batch: 10})
		require.NoError(t, c.Start(t.Context()))
		c.Send(outcome(0))
		c.Stop()
		require.Equal(t, []int{1}, st.sizes())
	})
}

// A transient error is tried again, with a backoff doubling from 50ms,
// until the store takes the batch.
func TestTransientRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, 10)
		var failures int
		b.store.answer = func(batch []store.Outcome) ([]store.FinishResult, error) {
			if failures < 3 {
				failures++
				return nil, durabletype.ErrTransient
			}
			return applied(batch), nil
		}
		b.send(3)
		begin := time.Now()
		require.NoError(t, b.c.Start(t.Context()))
		b.c.Stop()
		require.Equal(t, 350*time.Millisecond, time.Since(begin), "50+100+200ms")
		require.Equal(t, []int{3, 3, 3, 3}, b.store.sizes())
		lost, _ := b.c.Lost()
		require.Zero(t, lost)
	})
}

// While the store fails transiently, recording goes on until Drain's
// deadline, then gives up: the outcomes are counted lost, and forgotten.
func TestDrainDeadlineGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, 10)
		b.store.answer = func([]store.Outcome) ([]store.FinishResult, error) { return nil, durabletype.ErrTransient }
		sent := b.send(3)
		require.NoError(t, b.c.Start(t.Context()))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		begin := time.Now()
		b.c.Drain(ctx)
		b.c.Drain(ctx) // again: nothing
		require.Equal(t, time.Minute, time.Since(begin))
		lost, err := b.c.Lost()
		require.Equal(t, 3, lost)
		require.ErrorIs(t, err, durabletype.ErrTransient)
		require.Equal(t, refs(sent), b.steps.forgotten)
		require.Empty(t, b.metrics)
	})
}

// GiveUp stops the retries at once.
func TestGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, 10)
		b.store.answer = func([]store.Outcome) ([]store.FinishResult, error) { return nil, durabletype.ErrTransient }
		b.send(1)
		require.NoError(t, b.c.Start(t.Context()))
		time.Sleep(time.Second)
		b.c.GiveUp()
		synctest.Wait()
		lost, _ := b.c.Lost()
		require.Equal(t, 1, lost)
		b.c.Stop()
	})
}

var errRefused = errors.New("refused")

// A batch the store refuses is split until the refused outcome stands
// alone: the others are recorded, and the refused one is recorded as a
// terminal failure of its step naming the store's error, with its meta.
// A refused release is not replaced: it is given up.
func TestRefusedOutcomeStandsAlone(t *testing.T) {
	for _, tc := range []struct {
		name           string
		kind           store.OutcomeKind
		refuseFailures bool
		lost           int
	}{
		{"replaced", store.OutcomeComplete, false, 0},
		{"replacement refused", store.OutcomeComplete, true, 1},
		{"release", store.OutcomeRelease, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := setup(t, 10)
				msgs := []Message[int]{outcome(0), outcome(1), outcome(2), outcome(3), outcome(4)}
				msgs[3].Outcome.Kind = tc.kind
				bad := msgs[3].Outcome.Task
				var recorded []store.Outcome
				b.store.answer = func(batch []store.Outcome) ([]store.FinishResult, error) {
					for _, o := range batch {
						if o.Task == bad && (o.Kind != store.OutcomeFail || tc.refuseFailures) {
							return nil, errRefused
						}
					}
					recorded = append(recorded, batch...)
					return applied(batch), nil
				}
				for _, m := range msgs {
					b.c.Send(m)
				}
				require.NoError(t, b.c.Start(t.Context()))
				b.c.Stop()
				lost, err := b.c.Lost()
				require.Equal(t, tc.lost, lost)
				var tasks []store.TaskRef
				for _, o := range recorded {
					tasks = append(tasks, o.Task)
				}
				others := refs(slices.Concat(msgs[:3], msgs[4:]))
				if tc.lost > 0 {
					require.ErrorIs(t, err, errRefused)
					require.ElementsMatch(t, others, tasks, "the others are recorded")
					return
				}
				require.ElementsMatch(t, append(others, bad), tasks)
				i := slices.IndexFunc(recorded, func(o store.Outcome) bool { return o.Task == bad })
				require.Equal(t, store.Outcome{
					Task: bad, Kind: store.OutcomeFail, Terminal: true,
					Error: "durable: the store refused this step's outcome: refused",
				}, recorded[i])
				require.ElementsMatch(t, []int{0, 1, 2, 3, 4}, slices.Concat(b.metrics...), "every meta counted once, the replaced outcome's too")
				require.Equal(t, refs(msgs), b.steps.forgotten)
			})
		})
	}
}

// An outcome the store recorded in the step's own transaction is not
// recorded again, but followed up as any other.
func TestRecordedInTx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, 10)
		m := outcome(7)
		m.Recorded = &store.FinishResult{}
		b.c.Send(m)
		require.NoError(t, b.c.Start(t.Context()))
		b.c.Stop()
		require.Empty(t, b.store.sizes())
		require.Equal(t, [][]int{{7}}, b.metrics)
		require.Equal(t, 1, b.wakes)
		require.Equal(t, refs([]Message[int]{m}), b.steps.forgotten)
	})
}

// An outcome the store rejects as stale is logged: a warning (the step ran
// twice), or, when its run was cancelled or its attempt timed out, a debug
// line.
func TestStaleLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, 10)
		b.store.answer = func(batch []store.Outcome) ([]store.FinishResult, error) {
			res := applied(batch)
			for i := range res {
				res[i].Status = store.FinishStale
			}
			return res, nil
		}
		sent := b.send(3)
		b.steps.cancelled[sent[1].Outcome.Task] = true
		b.steps.timedOut[sent[2].Outcome.Task] = true
		require.NoError(t, b.c.Start(t.Context()))
		b.c.Stop()
		require.Equal(t, []slog.Level{slog.LevelWarn}, b.logs.levels("durable: outcome rejected, the claim is no longer current"))
		require.Equal(t, []slog.Level{slog.LevelDebug}, b.logs.levels("durable: outcome not recorded, the run was cancelled"))
		require.Equal(t, []slog.Level{slog.LevelDebug}, b.logs.levels("durable: outcome not recorded, the attempt timed out and was recorded as failed"))
	})
}
