package durable

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/store"
)

// TestTimerLoopWithoutNotifications: while notifications flow, the
// leader's timer loop sleeps until the next timer it knows of (a minute
// at most), trusting a notification to announce an earlier one; once the
// listener says it is deaf (store.TopicDeaf: its connection lost, or no
// LISTEN behind a transaction pooler), it reads the next due time again
// every PollInterval, so a timer another engine set fires within
// PollInterval of its due time. Before, such a sleep woke up to a minute
// late.
func TestTimerLoopWithoutNotifications(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := memstore.New()
		e, _, rt := serviceEngine(t, st, Config{WorkerID: "leader", PollInterval: time.Second})
		defer rt.cancel()
		nap := NewWorkflow[int]("nap")
		Sleep(nap, "zz", 5*time.Second)
		require.NoError(t, e.Register(nap))

		rt.listener.Deliver(store.Notification{Topic: store.TopicResync}) // notifications flow
		require.NoError(t, rt.timers.Start(rt.ctx))
		synctest.Wait() // no timer: it waits a minute, or for a notification

		// The listener loses its connection and says so; then another
		// engine sets a timer, whose notification nobody hears.
		rt.listener.Deliver(store.Notification{Topic: store.TopicDeaf})
		synctest.Wait()
		id, err := nap.RunNoWait(ctx, e, "t", 0)
		require.NoError(t, err)
		time.Sleep(5*time.Second + e.cfg.PollInterval)
		synctest.Wait()
		require.Equal(t, durabletype.TaskCompleted, taskOf(t, st, id, "zz").State,
			"the sleep woke within PollInterval of its due time")

		// Notifications resume: the loop trusts them again, and sleeps
		// until the next timer it knows of.
		rt.listener.Deliver(store.Notification{Topic: store.TopicResync})
		synctest.Wait()
		id, err = nap.RunNoWait(ctx, e, "t", 1)
		require.NoError(t, err)
		time.Sleep(5*time.Second + e.cfg.PollInterval)
		synctest.Wait()
		require.NotEqual(t, durabletype.TaskCompleted, taskOf(t, st, id, "zz").State,
			"with notifications, a timer nobody announced waits for the loop's next look")
		rt.cancel()
	})
}
