package pgtest

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

type buffer struct{ strings.Builder }

func (*buffer) Close() error { return nil }

func TestNoteOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var w buffer
	open := func() (io.WriteCloser, error) { return &w, nil }
	key := parentKey() // a live process: its marker is not stale
	if !noteOnce(dir, key, open) {
		t.Fatal("the first binary did not write the note")
	}
	if w.String() != SkipNote+"\n" {
		t.Fatalf("wrote %q", w.String())
	}
	if noteOnce(dir, key, open) {
		t.Fatal("a second binary of the same go command wrote the note")
	}
	if w.String() != SkipNote+"\n" {
		t.Fatalf("wrote %q", w.String())
	}
	if !noteOnce(dir, "1-0", func() (io.WriteCloser, error) { return nil, errors.New("no terminal") }) {
		t.Fatal("another go command's first binary did not write the note (to stderr)")
	}

	// A marker of a process that is gone is removed, one of a live process
	// kept.
	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("no /proc: stale markers stay")
	}
	dead := filepath.Join(dir, markerPrefix+"999999999-1")
	live := filepath.Join(dir, markerPrefix+parentKey())
	for _, name := range []string{dead, live} {
		if err := os.WriteFile(name, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleMarkers(dir)
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale marker kept: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("live marker removed: %v", err)
	}
}

func TestParentKey(t *testing.T) {
	t.Parallel()
	key := parentKey()
	pid, start, _ := strings.Cut(key, "-")
	if pid != strconv.Itoa(os.Getppid()) {
		t.Fatalf("parent key %q does not start with the parent's pid %d", key, os.Getppid())
	}
	if _, err := os.Stat("/proc/self/stat"); err == nil && start == "" {
		t.Fatalf("parent key %q lacks the start time", key)
	}
	if key != parentKey() {
		t.Fatal("unstable parent key")
	}
}
