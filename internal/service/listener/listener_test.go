package listener

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/effectivelabs/durable/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// source delivers what it is sent on its channel until ctx is done, then
// returns err.
type source struct {
	send chan store.Notification
	err  error
}

func (s *source) Listen(ctx context.Context, deliver func(store.Notification)) error {
	for {
		select {
		case n := <-s.send:
			deliver(n)
		case <-ctx.Done():
			return s.err
		}
	}
}

type bundle struct {
	src   *source
	heard atomic.Bool
	mu    sync.Mutex
	got   []store.Topic
	l     *Listener
}

func setup(t *testing.T) *bundle {
	b := &bundle{src: &source{send: make(chan store.Notification)}}
	b.l = New(Config{Source: b.src, Heard: &b.heard, Deliver: func(n store.Notification) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.got = append(b.got, n.Topic)
	}})
	return b
}

func (b *bundle) topics() []store.Topic {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.got)
}

// The listener delivers every notification; notifications are heard from
// a resync until the listener is deaf, and again after the next resync,
// until it stops.
func TestDeliversAndHears(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		require.NoError(t, b.l.Start(t.Context()))
		require.False(t, b.heard.Load())
		for _, step := range []struct {
			topic store.Topic
			heard bool
		}{
			{store.TopicReady, false}, {store.TopicResync, true}, {store.TopicTimer, true},
			{store.TopicDeaf, false}, {store.TopicReady, false}, {store.TopicResync, true},
		} {
			b.src.send <- store.Notification{Topic: step.topic}
			synctest.Wait()
			require.Equal(t, step.heard, b.heard.Load(), "after %s", step.topic)
		}
		require.Equal(t, []store.Topic{store.TopicReady, store.TopicResync, store.TopicTimer, store.TopicDeaf, store.TopicReady, store.TopicResync}, b.topics())
		b.l.Stop()
		require.False(t, b.heard.Load(), "none heard once stopped")
	})
}

// A listener that fails stops; none is heard then.
func TestListenFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := setup(t)
		b.src.err = errors.New("gone")
		ctx, cancel := context.WithCancel(t.Context())
		require.NoError(t, b.l.Start(ctx))
		b.src.send <- store.Notification{Topic: store.TopicResync}
		synctest.Wait()
		require.True(t, b.heard.Load())
		cancel()
		<-b.l.Stopped()
		require.False(t, b.heard.Load())
	})
}

// Without a source, the listener does nothing.
func TestNoSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var heard atomic.Bool
		l := New(Config{Heard: &heard})
		require.NoError(t, l.Start(t.Context()))
		synctest.Wait()
		select {
		case <-l.Started():
			t.Fatal("started a goroutine")
		default:
		}
		l.Stop()
	})
}
