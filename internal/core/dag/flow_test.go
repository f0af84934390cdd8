package dag

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAdmit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name                        string
		held, max, parked, arrivals int
		wantPromote, wantAdmit      int
	}{
		{"free slots take arrivals", 0, 2, 0, 3, 0, 2},
		{"parked go first", 1, 2, 3, 1, 1, 0},
		{"both", 0, 3, 1, 5, 1, 2},
		{"full", 2, 2, 4, 1, 0, 0},
		{"cap lowered below held", 5, 2, 1, 1, 0, 0},
		{"nothing waits", 0, 1, 0, 0, 0, 0},
	} {
		p, a := AdmitSlots(tt.held, tt.max, tt.parked, tt.arrivals)
		require.Equal(t, tt.wantPromote, p, tt.name)
		require.Equal(t, tt.wantAdmit, a, tt.name)
	}
}

func TestWindow(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	require.Equal(t, time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), RateWindow(t0, time.Minute))
	require.Equal(t, time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), RateWindow(t0, time.Hour))
	require.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), RateWindow(t0, time.Second))
	before := time.Unix(-1, 0)
	require.Equal(t, time.Unix(-60, 0).UTC(), RateWindow(before, time.Minute), "before the epoch")
}

func TestValidKey(t *testing.T) {
	t.Parallel()
	require.True(t, ValidFlowKey("customer-42"))
	require.False(t, ValidFlowKey(""))
	require.False(t, ValidFlowKey("a\nb"))
	require.False(t, ValidFlowKey(string(make([]byte, MaxFlowKeyLen+1))))
	require.False(t, ValidFlowKey("\xff"))
}
