package durable_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rootPackage is the import path of this package, the module's root.
const rootPackage = "github.com/effectivelabs/durable"

// TestInternalImportsNoRoot enforces the layering: no package under the
// module's top-level internal/ (nor its tests) imports the root package,
// directly or through other packages. Those packages are the engine's parts
// and shared test helpers; what builds on the engine (the built-in
// workflows of the durable binary, its crash proofs) lives under
// cmd/durable/internal/.
func TestInternalImportsNoRoot(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no go toolchain to list the internal packages")
		}
		t.Skip("no go toolchain to list the internal packages")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// -deps -test: every package under internal/, its test variants and
	// everything they depend on, each with its direct imports and all its
	// dependencies.
	cmd := exec.CommandContext(ctx, goBin, "list", "-deps", "-test", "-json", "./internal/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list:\n%s", stderr.String())

	type pkg struct {
		ImportPath string
		Imports    []string
		Deps       []string
	}
	// base strips what go list appends to a package compiled for a test:
	// "p [q.test]" is p.
	base := func(path string) string {
		path, _, _ = strings.Cut(path, " ")
		return path
	}
	dependsOnRoot := map[string]bool{} // by import path as listed
	var internal []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		dependsOnRoot[p.ImportPath] = slices.ContainsFunc(append(p.Deps, p.Imports...),
			func(d string) bool { return base(d) == rootPackage })
		// A test's generated main ("p.test") imports only p's test
		// variant, which is checked itself.
		if path := base(p.ImportPath); strings.HasPrefix(path, rootPackage+"/internal/") && !strings.HasSuffix(path, ".test") {
			internal = append(internal, p)
		}
	}
	require.NotEmpty(t, internal, "go list found no package under internal/")
	for _, p := range internal {
		if !dependsOnRoot[p.ImportPath] {
			continue
		}
		// Name the imports that bring the root package in.
		var via []string
		for _, imp := range p.Imports {
			if (base(imp) == rootPackage || dependsOnRoot[imp]) && !slices.Contains(via, base(imp)) {
				via = append(via, base(imp))
			}
		}
		t.Errorf("%s depends on the root package %s (importing %s): move it under cmd/durable/internal/ or drop the import",
			p.ImportPath, rootPackage, strings.Join(via, ", "))
	}
}
