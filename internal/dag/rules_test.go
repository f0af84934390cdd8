package dag

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/store"
)

func TestKindOf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		spec store.StepSpec
		want store.TaskKind
	}{
		{store.StepSpec{Name: "code"}, store.KindStep},
		{store.StepSpec{Name: "nap", Sleep: time.Hour}, store.KindSleep},
		{store.StepSpec{Name: "event", Wait: &store.WaitSpec{}}, store.KindEvent},
		{store.StepSpec{Name: "signal", Wait: &store.WaitSpec{Signal: "go"}}, store.KindEvent},
		{store.StepSpec{Name: "child", Child: &store.ChildSpec{Workflow: "w", Result: "r"}}, store.KindChild},
		{store.StepSpec{Name: "map", Map: &store.MapSpec{Over: "list"}}, store.KindMap},
		// Invalid specs (checkKind refuses them) still get one kind.
		{store.StepSpec{Name: "both", Sleep: time.Hour, Wait: &store.WaitSpec{}}, store.KindSleep},
		{store.StepSpec{Name: "negative", Sleep: -time.Hour}, store.KindStep},
	} {
		require.Equal(t, tt.want, KindOf(&tt.spec), tt.spec.Name)
	}

	// A compiled shape's tasks have the kinds of their specs; the task
	// after the steps is the on-failure handler.
	c, err := Compile(&store.Shape{
		Steps: []store.StepSpec{
			st("list"), {Name: "nap", Sleep: time.Hour, Retry: once()},
			{Name: "m", Parents: []string{"list"}, Map: &store.MapSpec{Over: "list"}, Retry: once()},
		},
		OnFailure: &store.OnFailureSpec{Retry: once()},
	})
	require.NoError(t, err)
	for i := range c.Len() {
		require.Equal(t, KindOf(c.Spec(i)), c.Kind(i))
	}
	require.Equal(t, store.KindOnFailure, c.Kind(c.Len()))
}
