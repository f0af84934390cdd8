package cronslot

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
)

// TestPause: a pause clears the next slot and keeps the error; a resume
// takes the next slot after now and clears the error; asking for what the
// schedule is already changes nothing; a resume of an expression that no
// longer parses is refused.
func TestPause(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 4, 10, 7, 0, 0, time.UTC)
	broken := &durabletype.Schedule{Name: "s", Cron: "*/5 * * * *", TimeZone: "UTC", NextAt: now.Add(time.Minute),
		Error: "workflow gone", UpdatedAt: now.Add(-time.Hour)}

	paused, err := Pause(broken, true, now)
	require.NoError(t, err)
	require.True(t, paused.Paused)
	require.True(t, paused.NextAt.IsZero())
	require.Equal(t, "workflow gone", paused.Error, "a pause keeps the error")
	require.Equal(t, now, paused.UpdatedAt)
	require.False(t, broken.Paused, "the record given is not changed")

	again, err := Pause(paused, true, now.Add(time.Minute))
	require.NoError(t, err)
	require.Nil(t, again, "already paused: nothing changes")

	resumed, err := Pause(paused, false, now)
	require.NoError(t, err)
	require.False(t, resumed.Paused)
	require.Equal(t, time.Date(2026, 3, 4, 10, 10, 0, 0, time.UTC), resumed.NextAt)
	require.Empty(t, resumed.Error, "a resume clears the error")
	require.Equal(t, now, resumed.UpdatedAt)

	none, err := Pause(resumed, false, now)
	require.NoError(t, err)
	require.Nil(t, none, "already running: nothing changes")

	bad := *paused
	bad.Cron = "not cron"
	_, err = Pause(&bad, false, now)
	require.Error(t, err)
}
