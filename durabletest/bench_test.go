package durabletest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletest"
)

// BenchmarkVirtualSleep measures the real time a kit spends on a run that
// sleeps for days of virtual time: the engine, idle while the run sleeps,
// should cost next to nothing however much virtual time passes.
func BenchmarkVirtualSleep(b *testing.B) {
	for _, days := range []int{1, 7, 30} {
		b.Run(fmt.Sprintf("days=%d", days), func(b *testing.B) {
			wf := durable.NewWorkflow[int]("sleeper")
			durable.Sleep(wf, "nap", time.Duration(days)*24*time.Hour)
			for b.Loop() {
				// synctest needs a *testing.T: run the kit as a test.
				ok := testing.RunTests(func(string, string) (bool, error) { return true, nil }, []testing.InternalTest{{
					Name: "sleep",
					F: func(t *testing.T) {
						durabletest.Run(t, func(t *testing.T, k *durabletest.Kit) {
							durabletest.RequireCompleted(t, durabletest.Execute(k, wf, 1))
						})
					},
				}})
				if !ok {
					b.Fatal("the run did not complete")
				}
			}
		})
	}
}
