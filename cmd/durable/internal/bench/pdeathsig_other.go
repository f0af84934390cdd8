//go:build !linux

package bench

import "os/exec"

// setParentDeathSignal does nothing outside Linux: a worker whose bench
// died must be stopped by hand.
func setParentDeathSignal(*exec.Cmd) {}
