package dag

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// TestReadShape: a recorded shape compiles; one with a field this engine
// does not know, or one the compiler refuses, is a *durabletype.ShapeError
// matching ErrUnknownShape, never a panic.
func TestReadShape(t *testing.T) {
	t.Parallel()
	good, err := json.Marshal(&durabletype.Shape{Version: "1", Steps: []durabletype.StepSpec{st("a"), st("b", "a")}})
	require.NoError(t, err)
	c, err := ReadShape("s", good)
	require.NoError(t, err)
	require.Equal(t, 2, c.Len())

	for name, js := range map[string]string{
		"unknown step kind":  `{"steps":[{"name":"a","retry":{"max_attempts":1,"factor":1},"future":{}}]}`,
		"unknown field":      `{"steps":[{"name":"a","retry":{"max_attempts":1,"factor":1}}],"future":1}`,
		"refused by Compile": `{"steps":[{"name":"a","parents":["nope"],"retry":{"max_attempts":1,"factor":1}}]}`,
		"not a shape":        `[1,2]`,
		"no steps":           `{}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReadShape("s", []byte(js))
			require.ErrorIs(t, err, durabletype.ErrUnknownShape)
			var se *durabletype.ShapeError
			require.True(t, errors.As(err, &se))
			require.Equal(t, "s", se.Shape)
			rec := store.Run{ID: uuid.New(), Workflow: "wf"}
			err = ForRun(err, &rec)
			require.ErrorIs(t, err, durabletype.ErrUnknownShape)
			require.Contains(t, err.Error(), "workflow wf needs a newer engine")
		})
	}
}

// TestLeave: a run the change leaves alone is in none of its transitions;
// an action on it reports its ShapeError (within the action's tenant
// scope: outside it, the run is not found), and its messages stay pending.
func TestLeave(t *testing.T) {
	t.Parallel()
	sh := &durabletype.Shape{Steps: []durabletype.StepSpec{st("a")}}
	normal := start(t, sh)
	left := store.Run{ID: uuid.New(), Workflow: "wf", Tenant: "t"}
	why := ForRun(&durabletype.ShapeError{Shape: "s", Reason: errors.New("x")}, &left)
	runs := map[uuid.UUID]*Run{normal.Rec.ID: normal}
	find := func(id uuid.UUID) *Run { return runs[id] }

	c := NewChange(t0.Add(time.Hour))
	c.Leave(left, why)
	require.ErrorIs(t, c.Left(left.ID), durabletype.ErrUnknownShape)
	require.NoError(t, c.Left(normal.Rec.ID))
	require.True(t, c.KeepsMessages(left.ID))
	require.False(t, c.KeepsMessages(normal.Rec.ID))

	res, err := c.Act(&store.ActOnRunsParams{Action: durabletype.ActionCancel, IDs: []uuid.UUID{left.ID, normal.Rec.ID}}, find)
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, durabletype.ErrUnknownShape)
	require.NoError(t, res[1].Err)
	require.Equal(t, []*Run{normal}, c.Runs, "only the readable run changes")

	c = NewChange(t0.Add(time.Hour))
	c.Leave(left, why)
	res, err = c.Act(&store.ActOnRunsParams{Action: durabletype.ActionCancel, Tenant: "other", IDs: []uuid.UUID{left.ID}}, find)
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, durabletype.ErrRunNotFound, "another tenant's run is not found, readable or not")
	require.NotErrorIs(t, res[0].Err, durabletype.ErrUnknownShape)
}
