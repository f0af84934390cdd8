package durabletest

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// FakeTB is a testing.TB that records failures instead of failing the
// test, so that the kit's own tests can check that an assertion fails when
// it should, and says why. Fatalf and FailNow end the calling goroutine, as
// a real test's do: run the code under test with Capture.
type FakeTB struct {
	testing.TB // nil: the methods below are the only ones the kit calls

	mu      sync.Mutex
	failed  bool
	skipped bool
	msgs    []string
}

func (f *FakeTB) Helper() {}

func (f *FakeTB) Log(args ...any) { f.record(false, fmt.Sprint(args...)) }

func (f *FakeTB) Logf(format string, args ...any) { f.record(false, fmt.Sprintf(format, args...)) }

func (f *FakeTB) Error(args ...any) { f.record(true, fmt.Sprint(args...)) }

func (f *FakeTB) Errorf(format string, args ...any) { f.record(true, fmt.Sprintf(format, args...)) }

func (f *FakeTB) Fatal(args ...any) {
	f.record(true, fmt.Sprint(args...))
	runtime.Goexit()
}

func (f *FakeTB) Fatalf(format string, args ...any) {
	f.record(true, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (f *FakeTB) FailNow() {
	f.record(true, "")
	runtime.Goexit()
}

func (f *FakeTB) Fail() { f.record(true, "") }

func (f *FakeTB) Skipf(format string, args ...any) {
	f.record(false, fmt.Sprintf(format, args...))
	f.mu.Lock()
	f.skipped = true
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *FakeTB) Skipped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.skipped
}

func (f *FakeTB) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *FakeTB) record(fail bool, msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = f.failed || fail
	if msg != "" {
		f.msgs = append(f.msgs, msg)
	}
}

// Messages returns what was reported, one message a line.
func (f *FakeTB) Messages() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.msgs, "\n")
}

// Capture runs fn with a FakeTB in a goroutine of its own (which Fatalf
// ends), waits for it, and returns the FakeTB.
func Capture(fn func(tb testing.TB)) *FakeTB {
	f := &FakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

// WithTB returns a copy of k that reports its failures to tb.
func WithTB(k *Kit, tb testing.TB) *Kit { return k.with(tb) }
