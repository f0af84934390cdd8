package bench

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal has Linux send the worker SIGTERM if the bench dies
// without stopping it, so no worker outlives its benchmark.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
