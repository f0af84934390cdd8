package dag

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

func TestWorkerRefresh(t *testing.T) {
	for _, tt := range []struct{ deadAfter, want time.Duration }{
		{30 * time.Second, 10 * time.Second},
		{3 * time.Second, time.Second},
		{time.Minute, MaxWorkerRefresh},
		{time.Hour, MaxWorkerRefresh},
		{time.Microsecond, time.Millisecond},
	} {
		if got := WorkerRefresh(tt.deadAfter); got != tt.want {
			t.Errorf("WorkerRefresh(%s) = %s, want %s", tt.deadAfter, got, tt.want)
		}
	}
}

func TestWorkerLive(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const window = 30 * time.Second
	for _, tt := range []struct {
		age  time.Duration
		want bool
	}{
		{0, true},
		{-time.Second, true}, // seen "in the future": the clock moved back
		{window - time.Microsecond, true},
		{window, false},
		{time.Hour, false},
	} {
		if got := WorkerLive(t0.Add(-tt.age), t0, window); got != tt.want {
			t.Errorf("WorkerLive(age %s, window %s) = %v, want %v", tt.age, window, got, tt.want)
		}
	}
}

func TestWorkerPrunable(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		age, window time.Duration
		want        bool
	}{
		{time.Hour, 30 * time.Second, false},
		{WorkerPruneAfter - time.Microsecond, 30 * time.Second, false},
		{WorkerPruneAfter, 30 * time.Second, true},
		{WorkerPruneAfter, 2 * WorkerPruneAfter, false}, // still live by its own window
		{2 * WorkerPruneAfter, 2 * WorkerPruneAfter, true},
	} {
		if got := WorkerPrunable(t0.Add(-tt.age), t0, tt.window); got != tt.want {
			t.Errorf("WorkerPrunable(age %s, window %s) = %v, want %v", tt.age, tt.window, got, tt.want)
		}
	}
}

func TestServes(t *testing.T) {
	wfs := []string{"a", "checkout", "z"}
	for _, tt := range []struct {
		wf   string
		want bool
	}{{"checkout", true}, {"a", true}, {"z", true}, {"check", false}, {"", false}} {
		if got := Serves(wfs, tt.wf); got != tt.want {
			t.Errorf("Serves(%v, %q) = %v, want %v", wfs, tt.wf, got, tt.want)
		}
	}
	if Serves(nil, "a") {
		t.Error("Serves(nil, a) = true")
	}
}

func TestCheckWorker(t *testing.T) {
	ok := store.Worker{ID: "w-1", Host: "h", Version: "v1", Workflows: []string{"a", "b"}, Concurrency: 4, DeadAfter: time.Second}
	if err := CheckWorker(&ok); err != nil {
		t.Fatalf("CheckWorker(valid) = %v", err)
	}
	for name, mod := range map[string]func(w *store.Worker){
		"empty id":       func(w *store.Worker) { w.ID = "" },
		"control id":     func(w *store.Worker) { w.ID = "a\nb" },
		"long host":      func(w *store.Worker) { w.Host = strings.Repeat("h", MaxWorkerLabelLen+1) },
		"bad version":    func(w *store.Worker) { w.Version = "\xff" },
		"unsorted":       func(w *store.Worker) { w.Workflows = []string{"b", "a"} },
		"duplicate":      func(w *store.Worker) { w.Workflows = []string{"a", "a"} },
		"negative":       func(w *store.Worker) { w.InFlight = -1 },
		"zero deadAfter": func(w *store.Worker) { w.DeadAfter = 0 },
	} {
		w := ok
		mod(&w)
		if err := CheckWorker(&w); !errors.Is(err, durabletype.ErrInvalidWorker) {
			t.Errorf("%s: CheckWorker = %v, want ErrInvalidWorker", name, err)
		}
	}
}
