package durable_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/memstore"
)

type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

func TestLinearOutputsFlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { scenarioLinear(context.Background(), t, memStarter(memstore.New())) })
}

func TestRunNoWaitThenWaitAndGet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		wf := durable.NewWorkflow[int]("nowait")
		a := durable.Step(wf, "a", func(ctx durable.Context, in int) (int, error) {
			<-release
			return in * 2, nil
		})
		e := startEngine(t, memstore.New(), durable.Config{}, wf)
		ctx := context.Background()
		id, err := wf.RunNoWait(ctx, e, "t", 21)
		require.NoError(t, err)
		require.NotEqual(t, uuid.Nil, id)
		synctest.Wait()
		res, err := e.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durable.RunRunning, res.Status)
		require.False(t, res.Done())
		s, ok := res.Step("a")
		require.True(t, ok)
		require.Equal(t, durable.StepRunning, s.State)

		close(release)
		res, err = e.Wait(ctx, id)
		require.NoError(t, err)
		require.Equal(t, durable.RunCompleted, res.Status)
		v, err := a.Result(res)
		require.NoError(t, err)
		require.Equal(t, 42, v)

		_, err = e.Get(ctx, uuid.New())
		require.ErrorIs(t, err, durable.ErrRunNotFound)
		_, err = e.Wait(ctx, uuid.New())
		require.ErrorIs(t, err, durable.ErrRunNotFound)
	})
}

func TestDiamond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { scenarioDiamond(context.Background(), t, memStarter(memstore.New())) })
}

func TestFanOutFanIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		scenarioFanOutFanIn(context.Background(), t, memStarter(memstore.New()))
	})
}

func TestTwoRoots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running atomic.Int32
		both := make(chan struct{})
		root := func(ctx durable.Context, in int) (int, error) {
			if running.Add(1) == 2 {
				close(both)
			}
			<-both // both roots start without waiting for each other
			return in, nil
		}
		wf := durable.NewWorkflow[int]("roots")
		a := durable.Step(wf, "a", root)
		b := durable.Step(wf, "b", root)
		j := durable.Step(wf, "join", func(ctx durable.Context, in int) (int, error) {
			va, _ := a.Output(ctx)
			vb, _ := b.Output(ctx)
			return va + vb, nil
		}, durable.After(a, b))
		e := startEngine(t, memstore.New(), durable.Config{}, wf)
		res, err := wf.Run(context.Background(), e, "t", 7)
		require.NoError(t, err)
		v, err := j.Result(res)
		require.NoError(t, err)
		require.Equal(t, 14, v)
	})
}
