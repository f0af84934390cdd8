package pgtest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

// SkipNote is the line NoteSkipped prints.
const SkipNote = "durable: PostgreSQL tests skipped: set " + EnvURL + " (see CONTRIBUTING.md)"

// skipped is set when URL skips a test.
var skipped atomic.Bool

// markerPrefix starts the names of the marker files in os.TempDir() that
// keep one go test invocation from printing SkipNote more than once.
const markerPrefix = "durable-pgtest-skipnote-"

// NoteSkipped tells the developer, once per go test invocation, that
// PostgreSQL tests were skipped for want of EnvURL. Call it from TestMain
// after m.Run.
//
// Without -v, go test ./... discards the output of test binaries that
// pass, TestMain's included, so a skipped PostgreSQL suite would go
// unnoticed. NoteSkipped therefore writes SkipNote to the controlling
// terminal (/dev/tty) when it can open it, else to stderr. Only the first
// test binary of one go test invocation writes it: they share the go
// command as parent process, and the first creates a marker file in
// os.TempDir() named after it. It does nothing when no test of this binary
// skipped (EnvURL set, CI=true, or no PostgreSQL test ran).
func NoteSkipped() {
	if !skipped.Load() {
		return
	}
	noteOnce(os.TempDir(), parentKey(), openTerminal)
}

// noteOnce writes SkipNote through open unless the marker for key exists in
// dir; it reports whether it wrote.
func noteOnce(dir, key string, open func() (io.WriteCloser, error)) bool {
	removeStaleMarkers(dir)
	f, err := os.OpenFile(filepath.Join(dir, markerPrefix+key), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false // another test binary of this invocation said it
		}
		// No marker possible: saying it more than once beats not at all.
	} else {
		f.Close()
	}
	w, err := open()
	if err != nil {
		fmt.Fprintln(os.Stderr, SkipNote)
		return true
	}
	defer w.Close()
	fmt.Fprintln(w, SkipNote)
	return true
}

// openTerminal opens the controlling terminal for writing.
func openTerminal() (io.WriteCloser, error) {
	return os.OpenFile("/dev/tty", os.O_WRONLY, 0)
}

// parentKey identifies the parent process (the go command): its pid and,
// on Linux, its start time, so that a later process reusing the pid does
// not find an old marker.
func parentKey() string {
	ppid := os.Getppid()
	key := strconv.Itoa(ppid)
	if start, ok := startTime(ppid); ok {
		key += "-" + start
	}
	return key
}

// startTime returns a process's start time (in clock ticks since boot) from
// /proc/<pid>/stat, where the /proc file system exists.
func startTime(pid int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false
	}
	// The command name, field 2, is in parentheses and may hold spaces;
	// the fields after it start with field 3, state. Start time is 22.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return "", false
	}
	return fields[19], true
}

// removeStaleMarkers deletes markers of go commands that have exited, where
// /proc tells which processes exist.
func removeStaleMarkers(dir string) {
	if _, err := os.Stat("/proc/self"); err != nil {
		return
	}
	names, _ := filepath.Glob(filepath.Join(dir, markerPrefix+"*"))
	for _, name := range names {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(name), markerPrefix), "-")
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); errors.Is(err, fs.ErrNotExist) {
			os.Remove(name) //nolint:errcheck // another binary may have removed it
		}
	}
}
