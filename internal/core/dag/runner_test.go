package dag

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// stubTx is a Tx that finds no message, knows no shape and fails Write
// with err.
type stubTx struct{ err error }

func (stubTx) FirstMessages(_ context.Context, qs []WaitQuery) ([]Found, error) {
	return make([]Found, len(qs)), nil
}

func (stubTx) NewRun(context.Context, *store.NewRun, time.Time) (*Compiled, error) {
	return nil, errors.New("no shapes here")
}

func (stubTx) SlotsBefore(*Change) SlotsBefore { return nil }

func (stubTx) Counters(context.Context, *Admission, map[string]int) (*Counters, error) {
	return &Counters{}, nil
}

func (tx stubTx) Write(context.Context, *Change) error { return tx.err }

// TestCommitRuleErrors: a refusal of the core comes out of Commit as a
// RuleError with the refusal's text; an error of the driver's Tx comes
// out unchanged, not a RuleError.
func TestCommitRuleErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	r := startSteps(t, st("a"))
	c := NewChange(t0)
	c.Add(r, Effects{Spawned: []store.NewRun{{Workflow: "not a name!"}}})
	err := Commit(ctx, stubTx{}, c)
	re, ok := errors.AsType[*RuleError](err)
	require.True(t, ok, "%v", err)
	require.ErrorIs(t, err, durabletype.ErrInvalidRun)
	require.Equal(t, re.Err.Error(), err.Error())

	driver := errors.New("pgstore: write: connection lost")
	c = NewChange(t0)
	c.Add(startSteps(t, st("a")), Effects{})
	err = Commit(ctx, stubTx{err: driver}, c)
	require.Same(t, driver, err)
	_, ok = errors.AsType[*RuleError](err)
	require.False(t, ok)
}
