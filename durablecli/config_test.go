package durablecli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
)

func runConfig(cfg Config, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), cfg, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestCommands: a program's own commands run with their arguments, are
// listed in the help after the standard ones, and cannot take a standard
// command's name.
func TestCommands(t *testing.T) {
	t.Parallel()
	var got []string
	hello := Command{Name: "hello", Summary: "say hello", Run: func(_ context.Context, args []string, stdout, _ io.Writer) int {
		got = args
		io.WriteString(stdout, "hello\n")
		return 7
	}}
	cfg := Config{Name: "app", Commands: []Command{hello}}
	code, out, _ := runConfig(cfg, "hello", "a", "--b")
	require.Equal(t, 7, code)
	require.Equal(t, "hello\n", out)
	require.Equal(t, []string{"a", "--b"}, got)

	code, out, _ = runConfig(cfg, "help")
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(out, "app runs durable DAG workflows on PostgreSQL."), out)
	require.Contains(t, out, "  version   print this binary's version, VCS revision and Go version\n  hello     say hello\n  help      show this help\n")
	require.Contains(t, out, "Workflows: none")
	require.Contains(t, out, `Run "app <command> -h" for a command's flags.`)

	for _, tc := range []struct {
		cmds []Command
		want string
	}{
		{[]Command{hello, hello}, `command "hello": given twice`},
		{[]Command{{Name: "worker", Run: hello.Run}}, `command "worker": the name of a standard command`},
		{[]Command{{Name: "help", Run: hello.Run}}, `command "help": the name of a standard command`},
		{[]Command{{Name: "x"}}, `command "x": a Name and a Run are required`},
	} {
		code, _, errOut := runConfig(Config{Name: "app", Commands: tc.cmds}, "version")
		require.Equal(t, 1, code, tc.want)
		require.Contains(t, errOut, "app: invalid durablecli.Config: "+tc.want)
	}
	code, _, errOut := runConfig(Config{Name: "app", DefaultInputs: []Input{{}}}, "version")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "an Input not made by DefaultInput")
}

// TestConfigName: the name defaults to the program's file name.
func TestConfigName(t *testing.T) {
	t.Parallel()
	require.Equal(t, filepath.Base(os.Args[0]), (&Config{}).name())
	require.Equal(t, "app", (&Config{Name: "app"}).name())
}

// TestWorkflowMistakes: a default input for a workflow the program does
// not serve, and a workflow that does not register, fail the commands that
// start runs (status 1, not a usage error), before connecting.
func TestWorkflowMistakes(t *testing.T) {
	t.Parallel()
	set := newFixtures(0)
	db := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none"}
	cfg := Config{Name: "app", Workflows: []durable.Definition{set.Noop},
		DefaultInputs: []Input{DefaultInput(set.DAG, 0)}}
	code, _, errOut := runConfig(cfg, append([]string{"trigger", "--workflow", "bench-noop"}, db...)...)
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, `app trigger: a default input for "bench-dag", which is not among the workflows`)

	broken := durable.NewWorkflow[int]("broken") // no step
	cfg = Config{Name: "app", Workflows: []durable.Definition{broken}}
	code, _, errOut = runConfig(cfg, append([]string{"trigger", "--workflow", "broken", "--input", "1"}, db...)...)
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "app trigger: ")
	require.Contains(t, errOut, "broken")

	code, _, errOut = runConfig(Config{Name: "app"}, append([]string{"trigger"}, db...)...)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "app trigger: --workflow is required, but this program serves no workflow")
	code, _, errOut = runConfig(Config{Name: "app"}, append([]string{"trigger", "--workflow", "x", "--input", "1"}, db...)...)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, `app trigger: unknown workflow "x": this program serves no workflow`)
}

// TestUnknownCommand: an unknown command is one line pointing to the
// help, with the nearest command when one is a typo away (the program's
// own commands too), exit 2; no help dumped.
func TestUnknownCommand(t *testing.T) {
	cfg := Config{Name: "app", Commands: []Command{{Name: "hello", Summary: "say hello", Run: func(context.Context, []string, io.Writer, io.Writer) int { return 0 }}}}
	for _, tc := range []struct{ arg, want string }{
		{"rnus", `app: unknown command "rnus"; see 'app help' (did you mean "runs"?)` + "\n"},
		{"wroker", `app: unknown command "wroker"; see 'app help' (did you mean "worker"?)` + "\n"},
		{"halp", `app: unknown command "halp"; see 'app help' (did you mean "help"?)` + "\n"},
		{"helloo", `app: unknown command "helloo"; see 'app help' (did you mean "hello"?)` + "\n"},
		{"Trigger", `app: unknown command "Trigger"; see 'app help' (did you mean "trigger"?)` + "\n"},
		{"deploy", `app: unknown command "deploy"; see 'app help'` + "\n"},
		{"x", `app: unknown command "x"; see 'app help'` + "\n"},
	} {
		code, out, errOut := runConfig(cfg, tc.arg)
		require.Equal(t, exitUsage, code, tc.arg)
		require.Empty(t, out)
		require.Equal(t, tc.want, errOut, tc.arg)
	}
}
