//go:build race

package durable_test

// Under the race detector TestSimulation runs fewer seeds, so that it fits
// in CI's time like the plain run.
func init() {
	simSeedsDefault = 60
	simRaceBuild = true
}
