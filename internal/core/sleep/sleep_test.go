package sleep

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !For(context.Background(), time.Hour) || time.Since(start) != time.Hour {
			t.Fatal("For did not wait its duration")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start = time.Now()
		if For(ctx, time.Hour) || time.Since(start) != time.Minute {
			t.Fatal("For did not stop when its context ended")
		}
	})
}
