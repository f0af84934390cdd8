package durable

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/core/dag"
)

// TestRetryFactorWithDefaultCap: Factor grows the delays without a
// MaxDelay, whatever InitialDelay is (the default cap was InitialDelay
// itself once InitialDelay reached a minute, so every delay was the first),
// and the default cap is 60 × InitialDelay, at least a minute.
func TestRetryFactorWithDefaultCap(t *testing.T) {
	t.Parallel()
	delays := func(p RetryPolicy, n int) []time.Duration {
		rec := p.record()
		var out []time.Duration
		for a := 1; a <= n; a++ {
			out = append(out, dag.RetryDelay(rec, a, 0))
		}
		return out
	}
	require.Equal(t, []time.Duration{5 * time.Minute, 15 * time.Minute, 45 * time.Minute, 135 * time.Minute, 5 * time.Hour},
		delays(RetryPolicy{MaxRetries: 5, InitialDelay: 5 * time.Minute, Factor: 3}, 5))
	require.Equal(t, []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute},
		delays(RetryPolicy{MaxRetries: 3, InitialDelay: time.Minute}, 3), "the default factor, 2")
	require.Equal(t, []time.Duration{time.Second, 10 * time.Second, time.Minute, time.Minute},
		delays(RetryPolicy{MaxRetries: 4, Factor: 10}, 4), "the default InitialDelay (1s) keeps its cap of a minute")
	require.Equal(t, time.Minute, RetryPolicy{InitialDelay: 100 * time.Millisecond}.record().MaxDelay, "at least a minute")
	require.Equal(t, 2*time.Second, RetryPolicy{InitialDelay: time.Minute, MaxDelay: 2 * time.Second}.record().MaxDelay, "a cap set is kept")
}
