//go:build unix

package pgtest_test

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

// TestNoteSkipped runs child test binaries without the URL, as the go
// command would, in a new session (so without a controlling terminal, and
// the note goes to stderr): the first says that PostgreSQL tests were
// skipped, a second one of the same parent does not, and one that skipped
// no PostgreSQL test says nothing.
func TestNoteSkipped(t *testing.T) {
	t.Parallel()
	child := func(tmp, run string, extraEnv ...string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run="+run)
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, pgtest.EnvURL+"=") && !strings.HasPrefix(kv, "CI=") && !strings.HasPrefix(kv, "TMPDIR=") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, append([]string{"PGTEST_CHILD=note", "TMPDIR=" + tmp}, extraEnv...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	tmp := t.TempDir()
	out := child(tmp, "^TestWithoutURL$")
	require.Equal(t, 1, strings.Count(out, pgtest.SkipNote), "%s", out)
	out = child(tmp, "^TestWithoutURL$")
	require.NotContains(t, out, pgtest.SkipNote, "said once per parent (go command)")

	out = child(t.TempDir(), "^TestNoSuchTest$")
	require.NotContains(t, out, pgtest.SkipNote, "no PostgreSQL test skipped")
	out = child(t.TempDir(), "^TestWithoutURL$", "CI=false")
	require.Contains(t, out, pgtest.SkipNote)
}
