package durablejson_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
)

// TestParseStatuses: statuses in any case, groups by meaning, each status
// once; an unknown word (a blank one too) is an *UnknownStatusError that
// lists what is accepted.
func TestParseStatuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []durabletype.RunStatus
	}{
		{"failed", []durabletype.RunStatus{durabletype.RunFailed}},
		{" Completed ,FAILED", []durabletype.RunStatus{durabletype.RunCompleted, durabletype.RunFailed}},
		{"in_flight", durabletype.RunStatusesWhere(durabletype.RunStatus.InFlight)},
		{"Settled", durabletype.RunStatusesWhere(durabletype.RunStatus.Settled)},
		{"unsuccessful,failed", durabletype.RunStatusesWhere(durabletype.RunStatus.Unsuccessful)},
	} {
		got, err := durablejson.ParseStatuses(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
	_, err := durablejson.ParseStatuses("completed,paused")
	var ue *durablejson.UnknownStatusError
	require.True(t, errors.As(err, &ue), "%v", err)
	require.Equal(t, "paused", ue.Word)
	require.Equal(t, `unknown status "paused": want running, completed, failed, cancelled, in_flight, settled, unsuccessful, comma-separated`, err.Error())
	_, err = durablejson.ParseStatuses("failed,,running")
	require.True(t, errors.As(err, &ue), "%v", err)
	require.Empty(t, ue.Word)
}

// TestNewStatuses: every status of durabletype.RunStatuses, in order, with
// its meaning; an action list is never null.
func TestNewStatuses(t *testing.T) {
	t.Parallel()
	st := durablejson.NewStatuses()
	require.Len(t, st.Statuses, len(durabletype.RunStatuses))
	for i, m := range st.Statuses {
		require.Equal(t, durabletype.RunStatuses[i], m.Status)
		require.Equal(t, m.Status.InFlight(), m.InFlight)
		require.NotNil(t, m.Actions)
	}
}
