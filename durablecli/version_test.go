package durablecli

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	// Under go test the build records no VCS fields: they print as unknown.
	code, out, errOut := runCLI(t, "version")
	require.Equal(t, 0, code, errOut)
	require.True(t, strings.HasPrefix(out, "durable "), out)
	require.Regexp(t, `(?m)^module:\s+github\.com/effectivelabs/durable`, out)
	require.Regexp(t, `(?m)^revision:\s+\S+$`, out)
	require.Regexp(t, `(?m)^time:\s+\S+$`, out)
	require.Regexp(t, `(?m)^modified:\s+(true|false|unknown)$`, out)
	require.Contains(t, out, "go:       "+runtime.Version())

	code, out, errOut = runCLI(t, "version", "--json")
	require.Equal(t, 0, code, errOut)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	for _, key := range []string{"module", "version", "revision", "time", "modified", "go"} {
		require.Contains(t, v, key)
	}
	require.Equal(t, runtime.Version(), v["go"])

	code, _, errOut = runCLI(t, "version", "extra")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `unexpected argument "extra"`)
	code, _, errOut = runCLI(t, "version", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "Usage: durable version")

	code, out, _ = runCLI(t, "help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "version   print")
}

func TestReadVersion(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "example.com/fork", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "-buildmode", Value: "exe"},
			{Key: "vcs.revision", Value: "0123abc"},
			{Key: "vcs.time", Value: "2026-11-24T03:38:32Z"},
			{Key: "vcs.modified", Value: "false"},
		},
	}
	v := readVersion(bi, true)
	require.Equal(t, "example.com/fork", v.Module)
	require.Equal(t, "v1.2.3", v.Version)
	require.Equal(t, "go1.26.0", v.Go)
	require.Equal(t, "0123abc", *v.Revision)
	require.Equal(t, "2026-11-24T03:38:32Z", *v.Time)
	require.False(t, *v.Modified)
	var sb strings.Builder
	v.writeText(&sb, "durable")
	require.Equal(t, `durable v1.2.3
module:   example.com/fork
revision: 0123abc
time:     2026-11-24T03:38:32Z
modified: false
go:       go1.26.0
`, sb.String())

	// Nothing recorded: graceful defaults, null in JSON.
	for _, v := range []versionInfo{readVersion(nil, false), readVersion(&debug.BuildInfo{}, true)} {
		require.Equal(t, modulePath, v.Module)
		require.Equal(t, "(devel)", v.Version)
		require.Equal(t, runtime.Version(), v.Go)
		sb.Reset()
		v.writeText(&sb, "durable")
		require.Contains(t, sb.String(), "revision: unknown\ntime:     unknown\nmodified: unknown\n")
		b, err := json.Marshal(v)
		require.NoError(t, err)
		require.Contains(t, string(b), `"revision":null,"time":null,"modified":null`)
	}
}
