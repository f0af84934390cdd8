package startstop

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lingering is a service that, once its context is done, takes linger to
// return; it counts its runs and says whether its goroutine has returned.
type lingering struct {
	Base
	linger   time.Duration
	runs     atomic.Int32
	returned atomic.Bool
}

func (s *lingering) Start(ctx context.Context) error {
	s.Go(ctx, func(ctx context.Context) {
		s.runs.Add(1)
		s.returned.Store(false)
		<-ctx.Done()
		time.Sleep(s.linger)
		s.returned.Store(true)
	})
	return nil
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Stop cancels the service's context and waits for its goroutine, however
// long it takes to return.
func TestStopWaitsForTheGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &lingering{linger: time.Second}
		started, stopped := s.Started(), s.Stopped()
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-started
		synctest.Wait()
		if closed(stopped) || s.returned.Load() {
			t.Fatal("the service stopped before Stop")
		}
		begin := time.Now()
		s.Stop()
		if !s.returned.Load() || !closed(stopped) {
			t.Fatal("Stop returned before the goroutine")
		}
		if d := time.Since(begin); d != time.Second {
			t.Fatalf("Stop took %s, want the goroutine's 1s", d)
		}
	})
}

// Starting a service that runs does nothing; stopping one that does not
// run does nothing, Stop before Start included, and a service stopped
// before it started can still start.
func TestIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &lingering{}
		s.Stop() // before Start
		if closed(s.Stopped()) || closed(s.Started()) {
			t.Fatal("Stop before Start closed the channels of the first run")
		}
		for range 3 {
			if err := s.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if n := s.runs.Load(); n != 1 {
			t.Fatalf("three starts ran %d goroutines, want 1", n)
		}
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(s.Stop) // all of them wait for the goroutine
		}
		wg.Wait()
		if !s.returned.Load() {
			t.Fatal("a Stop returned before the goroutine")
		}
		s.Stop()
		if n := s.runs.Load(); n != 1 {
			t.Fatalf("%d runs, want 1", n)
		}
	})
}

// A stopped service starts again, with new Started and Stopped channels;
// the old ones stay closed.
func TestRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &lingering{}
		_ = s.Start(t.Context())
		first, firstStopped := s.Started(), s.Stopped()
		s.Stop()
		if !closed(first) || !closed(firstStopped) {
			t.Fatal("the first run's channels are not closed")
		}
		if s.Started() != first || s.Stopped() != firstStopped {
			t.Fatal("between runs, the channels are the last run's")
		}
		_ = s.Start(t.Context())
		<-s.Started()
		if s.Started() == first || closed(s.Stopped()) {
			t.Fatal("the second run has the first run's channels")
		}
		s.Stop()
		if n := s.runs.Load(); n != 2 {
			t.Fatalf("%d runs, want 2", n)
		}
	})
}

// A service whose start context is done stops by itself; Stop then does
// nothing, and it can start again.
func TestStartContextDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &lingering{linger: time.Minute}
		ctx, cancel := context.WithCancel(t.Context())
		_ = s.Start(ctx)
		cancel()
		<-s.Stopped()
		if !s.returned.Load() {
			t.Fatal("Stopped closed before the goroutine returned")
		}
		begin := time.Now()
		s.Stop()
		if time.Since(begin) != 0 {
			t.Fatal("Stop waited for a service that had stopped")
		}
		_ = s.Start(t.Context())
		synctest.Wait()
		if n := s.runs.Load(); n != 2 {
			t.Fatalf("%d runs, want 2", n)
		}
		s.Stop()
	})
}

// A goroutine that returns of its own accord stops the service.
func TestReturnOfItsOwnAccord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		f := NewFunc(func(ctx context.Context) { runs.Add(1) })
		_ = f.Start(t.Context())
		<-f.Stopped()
		f.Stop()
		_ = f.Start(t.Context())
		<-f.Stopped()
		if n := runs.Load(); n != 2 {
			t.Fatalf("%d runs, want 2", n)
		}
	})
}

// draining is a service that records what it is sent until its input
// closes; it takes a second per item, and gives up on the rest when its
// context is done.
type draining struct {
	Base
	in       chan int
	done     []int
	gaveUp   bool
	closeOne sync.Once
}

func (s *draining) Start(ctx context.Context) error {
	s.Go(ctx, func(ctx context.Context) {
		for n := range s.in {
			if ctx.Err() != nil {
				s.gaveUp = true
				continue
			}
			time.Sleep(time.Second)
			s.done = append(s.done, n)
		}
	})
	return nil
}

// stop closes the input and waits for the rest to be recorded until ctx
// is done (Base.Wait).
func (s *draining) stop(ctx context.Context) {
	s.closeOne.Do(func() { close(s.in) })
	s.Wait(ctx)
}

// Wait waits for a goroutine that finishes of its own accord, until its
// context is done; then it cancels the service and waits for it.
func TestWait(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline time.Duration
		done     []int
		gaveUp   bool
		took     time.Duration
	}{
		{"in time", 10 * time.Second, []int{1, 2, 3}, false, 3 * time.Second},
		{"late", 1500 * time.Millisecond, []int{1, 2}, true, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &draining{in: make(chan int, 3)}
				_ = s.Start(t.Context())
				s.in <- 1
				s.in <- 2
				s.in <- 3
				ctx, cancel := context.WithTimeout(t.Context(), tc.deadline)
				defer cancel()
				begin := time.Now()
				s.stop(ctx)
				if took := time.Since(begin); took != tc.took {
					t.Errorf("took %s, want %s", took, tc.took)
				}
				if !slices.Equal(s.done, tc.done) || s.gaveUp != tc.gaveUp {
					t.Errorf("recorded %v (gave up: %t), want %v (%t)", s.done, s.gaveUp, tc.done, tc.gaveUp)
				}
				s.stop(ctx) // again: nothing
			})
		})
	}
	// A service that never started: nothing to wait for.
	(&draining{}).Wait(t.Context())
}

// Cancel cancels without waiting, and returns the channel of the
// goroutine's return.
func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &lingering{linger: time.Second}
		if s.Cancel() != nil {
			t.Fatal("Cancel of a service that does not run returned a channel")
		}
		_ = s.Start(t.Context())
		stopped := s.Cancel()
		synctest.Wait()
		if s.returned.Load() || closed(stopped) {
			t.Fatal("the goroutine returned before its linger")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if !closed(stopped) || !s.returned.Load() {
			t.Fatal("the goroutine did not return after its linger")
		}
	})
}

// StartInit and Run: a start with work of its own between them, done once
// however many starts are made, and a Stop in the meantime waits for the
// goroutine.
func TestStartInitRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b Base
		var inits, runs atomic.Int32
		gate := make(chan struct{})
		start := func() {
			ctx, ok := b.StartInit(t.Context())
			if !ok {
				return
			}
			inits.Add(1)
			<-gate
			b.Run(func() {
				runs.Add(1)
				<-ctx.Done()
			})
		}
		go start()
		synctest.Wait()
		start() // runs already: nothing
		stopped := make(chan struct{})
		go func() { b.Stop(); close(stopped) }()
		synctest.Wait()
		if closed(stopped) {
			t.Fatal("Stop returned before the goroutine ran")
		}
		close(gate)
		<-stopped
		if inits.Load() != 1 || runs.Load() != 1 {
			t.Fatalf("%d inits and %d runs, want 1 and 1", inits.Load(), runs.Load())
		}
	})
}

// journal lists what services did.
type journal struct {
	mu    sync.Mutex
	lines []string
}

func (j *journal) add(line string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lines = append(j.lines, line)
}

func (j *journal) take() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	l := j.lines
	j.lines = nil
	return l
}

// logged is a service that logs its starts and stops, and fails to start
// when told to.
type logged struct {
	Base
	name string
	log  *journal
	err  error
}

func (s *logged) Start(ctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	s.log.add("start " + s.name)
	s.Go(ctx, func(ctx context.Context) { <-ctx.Done() })
	return nil
}

func (s *logged) Stop() {
	if s.Cancel() != nil {
		s.Base.Stop()
		s.log.add("stop " + s.name)
	}
}

// StartAll starts in order; when one fails, it stops those it started in
// reverse order.
func TestStartAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log journal
		a, b, c := &logged{name: "a", log: &log}, &logged{name: "b", log: &log}, &logged{name: "c", log: &log}
		if err := StartAll(t.Context(), a, b, c); err != nil {
			t.Fatal(err)
		}
		StopAll(c, b, a)
		if got, want := log.take(), []string{"start a", "start b", "start c"}; !slices.Equal(got[:3], want) || len(got) != 6 {
			t.Fatalf("log %v, want %v then three stops", got, want)
		}

		boom := errors.New("boom")
		failing := &logged{name: "failing", log: &log, err: boom}
		if err := StartAll(t.Context(), a, b, failing, c); !errors.Is(err, boom) {
			t.Fatalf("StartAll returned %v, want %v", err, boom)
		}
		if got, want := log.take(), []string{"start a", "start b", "stop b", "stop a"}; !slices.Equal(got, want) {
			t.Fatalf("log %v, want %v", got, want)
		}
	})
}

// StopAll stops services at once: it takes as long as the slowest, not as
// long as all of them.
func TestStopAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var services []Service
		for i := 1; i <= 3; i++ {
			s := &lingering{linger: time.Duration(i) * time.Second}
			_ = s.Start(t.Context())
			services = append(services, s)
		}
		begin := time.Now()
		StopAll(services...)
		if d := time.Since(begin); d != 3*time.Second {
			t.Fatalf("StopAll took %s, want 3s", d)
		}
		for _, s := range services {
			if !s.(*lingering).returned.Load() {
				t.Fatal("StopAll returned before a service")
			}
		}
		StopAll() // none
	})
}

// Starts and stops from many goroutines at once: one goroutine at a time,
// and none left behind.
func TestConcurrentStartStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running, most atomic.Int32
		f := NewFunc(func(ctx context.Context) {
			n := running.Add(1)
			if n > most.Load() {
				most.Store(n)
			}
			<-ctx.Done()
			running.Add(-1)
		})
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				for j := range 20 {
					if (i+j)%3 == 0 {
						f.Stop()
					} else {
						_ = f.Start(t.Context())
					}
				}
			})
		}
		wg.Wait()
		f.Stop()
		if most.Load() != 1 {
			t.Fatalf("%d goroutines ran at once, want 1", most.Load())
		}
	})
}
