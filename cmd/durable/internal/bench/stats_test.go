package bench

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	xs := []float64{15, 20, 35, 40, 50} // the classic nearest-rank example
	require.Equal(t, 15.0, Percentile(xs, 5))
	require.Equal(t, 20.0, Percentile(xs, 30))
	require.Equal(t, 20.0, Percentile(xs, 40))
	require.Equal(t, 35.0, Percentile(xs, 50))
	require.Equal(t, 50.0, Percentile(xs, 100))
	require.Equal(t, 0.0, Percentile(nil, 50))

	shuffled := []float64{50, 15, 40, 20, 35}
	require.Equal(t, 35.0, Percentile(shuffled, 50))
	require.Equal(t, []float64{50, 15, 40, 20, 35}, shuffled, "the input is not modified")

	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // 100 .. 1
	}
	s := Summarize(hundred)
	require.Equal(t, Summary{N: 100, P50: 50, P95: 95, P99: 99, Max: 100}, s)
	require.Equal(t, Summary{N: 1, P50: 7, P95: 7, P99: 7, Max: 7}, Summarize([]float64{7}))
	require.Equal(t, Summary{}, Summarize(nil))
}

func TestJain(t *testing.T) {
	t.Parallel()
	require.Equal(t, 1.0, Jain([]float64{3, 3, 3, 3}))
	require.InDelta(t, 0.25, Jain([]float64{12, 0, 0, 0}), 1e-12, "one tenant has everything: 1/n")
	// (1+2+3+4)² / (4·(1+4+9+16)) = 100/120
	require.InDelta(t, 100.0/120, Jain([]float64{1, 2, 3, 4}), 1e-12)
	require.Equal(t, 1.0, Jain(nil))
	require.Equal(t, 1.0, Jain([]float64{0, 0}))
	// The fairness scenario's case: 100 for the smallest backlog, 111 for the others.
	xs := []float64{100, 111, 111, 111, 111, 111, 111, 111, 111, 111}
	j := Jain(xs)
	require.Greater(t, j, 0.99)
	require.Less(t, j, 1.0)
}

func TestMillis(t *testing.T) {
	t.Parallel()
	require.Equal(t, 1.5, Millis(1500*time.Microsecond))
	require.False(t, math.IsNaN(Millis(0)))
}
