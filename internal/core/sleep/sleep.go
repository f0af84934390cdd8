// Package sleep waits for a duration unless a context ends first.
package sleep

import (
	"context"
	"time"
)

// For waits for d, or until ctx is done. It reports whether d elapsed.
func For(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
