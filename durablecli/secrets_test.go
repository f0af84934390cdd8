package durablecli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/tools/cliflag"
)

// Secrets given through the environment never reach the help texts, and
// each flag's default is said once. Before Secret, "serve -h" printed
// "(default $DURABLE_API_TOKEN) (default "<the token>")", and the database
// URL the same way, password included.

const (
	secretPassword = "pa55-w0rd-SECRET"
	secretToken    = "tok-SECRET-123"
)

// helpCommands are every command and action, as run with -h.
var helpCommands = [][]string{
	{"help"}, {"migrate", "-h"}, {"worker", "-h"}, {"serve", "-h"}, {"trigger", "-h"},
	{"runs", "-h"}, {"runs", "list", "-h"}, {"runs", "show", "-h"}, {"runs", "cancel", "-h"},
	{"runs", "replay", "-h"}, {"runs", "prune", "-h"}, {"events", "-h"}, {"events", "send", "-h"},
	{"signal", "-h"}, {"stats", "-h"}, {"workers", "-h"}, {"schedules", "-h"}, {"schedules", "create", "-h"},
	{"schedules", "list", "-h"}, {"schedules", "pause", "-h"}, {"schedules", "resume", "-h"},
	{"schedules", "delete", "-h"}, {"version", "-h"},
}

// flagBlock is a flag's entry in flag.PrintDefaults' output.
var flagBlock = regexp.MustCompile(`(?m)^  -\S+.*\n(?:    \t.*\n)*`)

func TestHelpHidesSecrets(t *testing.T) { // not parallel: it sets the environment
	t.Setenv(cliflag.EnvDatabaseURL, "postgres://app:"+secretPassword+"@db.example:5432/prod?sslmode=disable")
	t.Setenv(envAPIToken, secretToken)
	t.Setenv(cliflag.EnvDirectDatabaseURL, "postgres://app:"+secretPassword+"@db-direct.example:5432/prod")
	for _, args := range helpCommands {
		code, out, errOut := runCLI(t, args...)
		require.Equal(t, 0, code, "%v: %s", args, errOut)
		help := out + errOut
		require.NotContains(t, help, secretPassword, "%v", args)
		require.NotContains(t, help, secretToken, "%v", args)
		for _, block := range flagBlock.FindAllString(help, -1) {
			require.LessOrEqual(t, strings.Count(block, "(default"), 1, "%v: a default said twice:\n%s", args, block)
		}
		if strings.Contains(help, "  -database-url URL\n") {
			require.Contains(t, help, "(default $DURABLE_DATABASE_URL: postgres://app:xxxxx@db.example:5432/prod?sslmode=disable)", "%v", args)
		}
	}
	_, _, help := runCLI(t, "worker", "-h")
	require.Contains(t, help, "(default $DURABLE_DIRECT_DATABASE_URL: postgres://app:xxxxx@db-direct.example:5432/prod)")
	_, _, help = runCLI(t, "serve", "-h")
	require.Contains(t, help, "  -token token\n    \tbearer token every API request must carry (default $DURABLE_API_TOKEN: set, hidden)\n")
}

// TestErrorsHideSecrets: the commands that connect say that they could
// not, without the password, whether the URL parses or not.
func TestErrorsHideSecrets(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"postgres://app:" + secretPassword + "@127.0.0.1:1/prod?connect_timeout=5",
		"postgres://app:" + secretPassword + "@127.0.0.1:port/prod",
		"postgres://app@127.0.0.1:1/prod?connect_timeout=5&password=" + secretPassword,
		"host=127.0.0.1 port=1 connect_timeout=5 password=" + secretPassword,
	} {
		for _, args := range [][]string{
			{"migrate", "up"}, {"worker"}, {"serve"}, {"trigger", "--workflow", "bench-noop"}, {"runs", "list"},
			{"events", "send", "--key", "k"}, {"stats"}, {"workers"}, {"schedules", "list"},
			{"schedules", "create", "s", "--cron", "@daily", "--workflow", "bench-noop"},
		} {
			code, out, errOut := runCLI(t, append(args, "--database-url", url)...)
			require.Equal(t, 1, code, "%v %s: %s", args, url, errOut)
			require.NotContains(t, out+errOut, secretPassword, "%v", args)
			require.Regexp(t, `connecting|cannot parse`, errOut, "%v", args)
		}
	}
}
