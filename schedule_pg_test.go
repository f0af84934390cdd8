package durable_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/internal/core/cronslot"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// pgFiredLog wraps a PostgreSQL store (one engine's) and records, into a
// log shared by every engine of the test, the slots its FireSchedules fired.
type pgFiredLog struct {
	*pgstore.Store
	log *sharedFired
}

type sharedFired struct {
	mu    sync.Mutex
	fired []store.FiredSlot
}

func (f *pgFiredLog) FireSchedules(ctx context.Context, p *store.FireSchedulesParams) (*store.FireSchedulesResult, error) {
	res, err := f.Store.FireSchedules(ctx, p)
	if err == nil {
		f.log.mu.Lock()
		f.log.fired = append(f.log.fired, res.Fired...)
		f.log.mu.Unlock()
	}
	return res, err
}

// TestSchedulePGFailover: three engines share a schema while a schedule
// fires every second; the leader's lease is expired under it and engines are
// stopped and started again, over and over. Every slot of the window is
// fired once or, when no leader ran at its time, skipped by the misfire
// rule (counted in a later slot's Missed); no slot is fired twice and no
// run exists but those of fired slots.
func TestSchedulePGFailover(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	log := &sharedFired{}
	var runs atomic.Int64
	wf := durable.NewWorkflow[int]("tick")
	durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
		runs.Add(1)
		return in, nil
	})
	launch := func(i int) *durable.Engine {
		s := &pgFiredLog{Store: env.newStore(t), log: log}
		e, err := durable.New(s, pgFast(durable.Config{WorkerID: "cron-" + string(rune('a'+i))}))
		require.NoError(t, err)
		require.NoError(t, e.Register(wf))
		require.NoError(t, e.Start(context.Background()))
		return e
	}
	stop := func(e *durable.Engine) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, e.Stop(ctx))
	}
	engines := []*durable.Engine{launch(0), launch(1), launch(2)}
	client := pgClient(t, env.store)
	require.NoError(t, client.Register(wf))
	sc, err := wf.Schedule(context.Background(), client, "t1", "every-second", 1, "* * * * * *", durable.ScheduleOptions{})
	require.NoError(t, err)

	rnd := rand.New(rand.NewPCG(1, 2))
	kills, restarts := 0, 0
	end := time.Now().Add(8 * time.Second)
	for time.Now().Before(end) {
		time.Sleep(time.Duration(300+rnd.IntN(700)) * time.Millisecond)
		if rnd.IntN(2) == 0 {
			expireLease(t, env)
			kills++
			continue
		}
		i := rnd.IntN(len(engines))
		stop(engines[i])
		engines[i] = launch(i + 3*(restarts+1))
		restarts++
	}
	for _, e := range engines {
		stop(e)
	}
	t.Logf("leader connections killed: %d, engines restarted: %d", kills, restarts)

	log.mu.Lock()
	fired := append([]store.FiredSlot(nil), log.fired...)
	log.mu.Unlock()
	require.NotEmpty(t, fired)
	seen := map[int64]bool{}
	first, last := fired[0].Slot, fired[0].Slot
	accounted := 0
	var worst time.Duration
	for _, f := range fired {
		k := f.Slot.UnixMicro()
		require.False(t, seen[k], "slot %s fired twice", f.Slot)
		seen[k] = true
		require.Equal(t, cronslot.RunID(sc.ID, f.Slot), f.RunID)
		if f.Slot.Before(first) {
			first = f.Slot
		}
		if f.Slot.After(last) {
			last = f.Slot
		}
		accounted += 1 + f.Missed
		worst = max(worst, f.At.Sub(f.Slot))
	}
	// The first fire may have skipped slots before the window; count from
	// the first slot after the schedule was created.
	window := int(last.Sub(sc.NextAt)/time.Second) + 1
	for at := sc.NextAt; !at.After(last); at = at.Add(time.Second) {
		if !seen[at.UnixMicro()] {
			var exists bool
			require.NoError(t, env.pool.QueryRow(context.Background(),
				`SELECT EXISTS (SELECT 1 FROM `+env.schema+`.runs WHERE id = $1)`, cronslot.RunID(sc.ID, at)).Scan(&exists))
			t.Logf("slot %s not fired (run exists: %v)", at, exists)
		}
	}

	require.Equal(t, window, accounted, "every slot from %s to %s is fired or skipped by the misfire rule", sc.NextAt, last)

	// Exactly the fired slots have runs.
	var n int
	require.NoError(t, env.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM `+env.schema+`.runs WHERE workflow = 'tick'`).Scan(&n))
	require.Equal(t, len(fired), n)
	skipped := accounted - len(fired)
	t.Logf("slots: %d fired, %d skipped while no leader ran; %d executed; worst fire lag %s",
		len(fired), skipped, runs.Load(), worst)
}
