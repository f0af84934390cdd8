package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/service/startstop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// duty counts its runs and says whether it runs.
type duty struct {
	startstop.Base
	runs    atomic.Int32
	running atomic.Bool
}

func (d *duty) Start(ctx context.Context) error {
	d.Go(ctx, func(ctx context.Context) {
		d.runs.Add(1)
		d.running.Store(true)
		<-ctx.Done()
		d.running.Store(false)
	})
	return nil
}

// changes notes the changes of leadership a leader reports.
type changes struct {
	mu  sync.Mutex
	got []bool
}

func (c *changes) note(leading bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, leading)
}

func (c *changes) all() []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]bool(nil), c.got...)
}

// Without an elector, the engine leads from its start until Stop, which
// returns once the duties have stopped.
func TestLeadsWithoutElector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &duty{}, &duty{}
		var c changes
		l := New(Config{WorkerID: "w", Duties: []startstop.Service{a, b}, Changed: c.note})
		require.False(t, l.Leading())
		require.NoError(t, l.Start(t.Context()))
		synctest.Wait()
		require.True(t, l.Leading())
		require.True(t, a.running.Load() && b.running.Load())
		require.Equal(t, []bool{true}, c.all())
		l.Stop()
		require.False(t, l.Leading())
		require.False(t, a.running.Load() || b.running.Load(), "Stop waits for the duties")
		require.Equal(t, []bool{true, false}, c.all())
	})
}

// elector elects the candidate for a term of a minute, twice, with a
// minute between, then fails.
type elector struct{}

func (elector) Lead(ctx context.Context, id string, lead func(ctx context.Context)) error {
	for range 2 {
		term, cancel := context.WithTimeout(ctx, time.Minute)
		lead(term)
		cancel()
		select {
		case <-time.After(time.Minute):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.New("election broke")
}

// With an elector, the engine leads while elected: the duties run during
// each term and stop when it ends; a failed election is logged.
func TestLeadsWhileElected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &duty{}
		var c changes
		var logs atomic.Int32
		l := New(Config{
			Elector: elector{}, WorkerID: "w", Duties: []startstop.Service{d}, Changed: c.note,
			Logger: slog.New(countErrors{&logs}),
		})
		require.NoError(t, l.Start(t.Context()))
		synctest.Wait()
		require.True(t, l.Leading() && d.running.Load())
		time.Sleep(time.Minute + time.Second)
		require.False(t, l.Leading() || d.running.Load(), "term over")
		time.Sleep(time.Minute)
		require.True(t, l.Leading() && d.running.Load(), "elected again")
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		<-l.Stopped()
		require.EqualValues(t, 2, d.runs.Load())
		require.Equal(t, []bool{true, false, true, false}, c.all())
		require.EqualValues(t, 1, logs.Load(), "the broken election is logged")
		l.Stop()
	})
}

// countErrors counts the errors logged.
type countErrors struct{ n *atomic.Int32 }

func (h countErrors) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h countErrors) Handle(context.Context, slog.Record) error {
	h.n.Add(1)
	return nil
}
func (h countErrors) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countErrors) WithGroup(string) slog.Handler      { return h }

// Deposed recognizes a refused leader's write, wrapped or not, and only
// that.
func TestDeposed(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	require.True(t, Deposed(log, durabletype.ErrNotLeader))
	require.True(t, Deposed(log, fmt.Errorf("fire timers: %w", durabletype.ErrNotLeader)))
	require.False(t, Deposed(log, errors.New("down")))
	require.False(t, Deposed(log, nil))
}
