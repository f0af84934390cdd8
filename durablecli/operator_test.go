package durablecli

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/cliflag"
)

func TestFilterFlags(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) (*runFilter, error) {
		var ff filterFlags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		ff.register(fs)
		require.NoError(t, fs.Parse(args))
		return ff.parse()
	}
	f, err := parse()
	require.NoError(t, err)
	require.False(t, f.given)
	require.Equal(t, durable.RunFilter{}, f.filter)

	f, err = parse("--status", " failed,Cancelled,FAILED ", "--workflow", "w", "--version", "3fa9c2e81b07", "--tenant", "t",
		"--since", "2026-11-24T10:00:00+01:00", "--until", "24h", "--finished-since", "0s", "--finished-until", "2026-11-24T10:00:00.5Z")
	require.NoError(t, err)
	require.True(t, f.given)
	require.Equal(t, durable.RunFilter{
		Statuses: []durabletype.RunStatus{durabletype.RunFailed, durabletype.RunCancelled}, Workflow: "w", Version: "3fa9c2e81b07", Tenant: "t",
		CreatedAfter:   time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC),
		FinishedBefore: time.Date(2026, 11, 24, 10, 0, 0, 500_000_000, time.UTC),
	}, f.filter, "absolute times in UTC, so that a cursor's fingerprint does not depend on the zone given")
	require.Equal(t, []relTime{{"until", "24h", 24 * time.Hour}, {"finished-since", "0s", 0}}, f.rel)

	for _, args := range [][]string{{"--status", "running"}, {"--workflow", "w"}, {"--tenant", "t"}, {"--finished-until", "1h"}} {
		f, err := parse(args...)
		require.NoError(t, err)
		require.True(t, f.given, "%v", args)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--status", "failed,,running"}, `--status "failed,,running": unknown status ""`},
		{[]string{"--status", "paused"}, `unknown status "paused"`},
		{[]string{"--since", "24"}, `--since "24": want an RFC 3339 time`},
		{[]string{"--until", "2026-11-24"}, `--until "2026-11-24": want an RFC 3339 time`},
		{[]string{"--finished-since", "-1s"}, `must not be negative`},
		{[]string{"--tenant", string([]byte{0xff})}, `--tenant "\xff" is not valid UTF-8: use 1-200 bytes of UTF-8`},
		{[]string{"--version", "-2"}, `--version "-2" starts with '-': use 1-64 bytes of letters, digits and _-.+, starting with a letter or digit`},
		{[]string{"--version", "v@2"}, `--version "v@2" holds '@': use 1-64`},
	} {
		_, err := parse(tc.args...)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}

func TestListCursor(t *testing.T) {
	t.Parallel()
	c, err := parseListCursor("abc", "durable")
	require.NoError(t, err)
	require.Equal(t, &listCursor{engine: "abc"}, c)
	require.Equal(t, "abc", c.String())

	at := time.Date(2026, 11, 24, 9, 0, 0, 123456000, time.UTC)
	c = &listCursor{engine: "abc", times: map[string]resolvedTime{"since": {Spec: "24h", At: at}}}
	back, err := parseListCursor(c.String(), "durable")
	require.NoError(t, err)
	require.Equal(t, c, back)

	for _, s := range []string{"abc.!!", "abc.e30x", ".e30"} {
		_, err := parseListCursor(s, "durable")
		require.ErrorIs(t, err, durable.ErrInvalidCursor, s)
	}
}

func TestContinueCommand(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("runs list", flag.ContinueOnError)
	var db cliflag.DB
	db.Register(fs, false)
	var ff filterFlags
	ff.register(fs)
	fs.Int("limit", 50, "")
	fs.String("cursor", "", "")
	fs.Bool("json", false, "")
	require.NoError(t, fs.Parse([]string{"--database-url", "postgres://u:secret@h/db", "--tenant", "it's me", "--status", "failed",
		"--cursor", "old", "--limit", "5"}))
	require.Equal(t, `durable runs list --limit 5 --status failed --tenant 'it'\''s me' --cursor new`, continueCommand("durable", fs, "new"))
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                        "''",
		"plain-1.0_x/y:z=a,b+c@d": "plain-1.0_x/y:z=a,b+c@d",
		"two words":               "'two words'",
		"it's":                    `'it'\''s'`,
		"$HOME":                   "'$HOME'",
		"é":                       "'é'",
	} {
		require.Equal(t, want, shellQuote(in), in)
	}
}
