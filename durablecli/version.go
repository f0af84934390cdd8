package durablecli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

const versionUsage = `Usage: {name} version [--json]

Prints the version of this binary, as the Go toolchain recorded it when
building: its main module's path and version ("(devel)" for a build from a working
tree without a version), the VCS revision, its commit time and whether the
working tree had uncommitted changes, and the Go version. Fields the build
did not record (under "go run" or "go test", or built outside a
repository) print as "unknown", and as null with --json.

Flags:
`

// modulePath is durable's module path, for builds that do not record
// theirs.
const modulePath = "github.com/effectivelabs/durable"

// versionInfo is what "version" prints. Pointers are nil when the
// build did not record the field.
type versionInfo struct {
	Module   string  `json:"module"`
	Version  string  `json:"version"`
	Revision *string `json:"revision"`
	Time     *string `json:"time"`
	Modified *bool   `json:"modified"`
	Go       string  `json:"go"`
}

// readVersion extracts the version fields from build information; bi may be
// nil (ok false) for binaries built without module support.
func readVersion(bi *debug.BuildInfo, ok bool) versionInfo {
	v := versionInfo{Module: modulePath, Version: "(devel)", Go: runtime.Version()}
	if !ok || bi == nil {
		return v
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = &s.Value
		case "vcs.time":
			v.Time = &s.Value
		case "vcs.modified":
			m := s.Value == "true"
			v.Modified = &m
		}
	}
	return v
}

// writeText prints v as "name: value" lines, after the program's name
// and version.
func (v versionInfo) writeText(w io.Writer, prog string) {
	str := func(p *string) string {
		if p == nil || *p == "" {
			return "unknown"
		}
		return *p
	}
	modified := "unknown"
	if v.Modified != nil {
		modified = fmt.Sprint(*v.Modified)
	}
	fmt.Fprintf(w, "%s %s\n", prog, v.Version)
	fmt.Fprintf(w, "module:   %s\n", v.Module)
	fmt.Fprintf(w, "revision: %s\n", str(v.Revision))
	fmt.Fprintf(w, "time:     %s\n", str(v.Time))
	fmt.Fprintf(w, "modified: %s\n", modified)
	fmt.Fprintf(w, "go:       %s\n", v.Go)
}

func (c *cli) versionCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := c.flagSet("version", versionUsage, stderr)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if code := c.parseFlags(fs, args, stderr, 0); code >= 0 {
		return code
	}
	v := readVersion(debug.ReadBuildInfo())
	if !*asJSON {
		v.writeText(stdout, c.name)
		return 0
	}
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(stderr, "%s version: %v\n", c.name, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}
