package durable_test

import (
	"bufio"
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

// layer is one floor of the module: the packages under prefix may depend
// only on the module's packages that one of allowed names (by prefix, or
// the root package for "").
type layer struct {
	name    string
	prefix  string
	allowed []string
}

// layers are the module's floors, bottom up. The folders say which is
// which: internal/core is below the drivers (the functional core and the
// leaf helpers the drivers use), internal/service holds the engine's
// services (above the port, below the root), internal/tools the helpers of
// the CLI and the tests (above the drivers).
var layers = []layer{
	{"vocabulary", rootPackage + "/durabletype", nil},
	{"conformance suite", rootPackage + "/store/storetest", []string{"/durabletype", "/store", "/internal/core/"}},
	{"port", rootPackage + "/store", []string{"/durabletype"}},
	{"core", rootPackage + "/internal/core/", []string{"/durabletype", "/store", "/internal/core/"}},
	{"services", rootPackage + "/internal/service/", []string{"/durabletype", "/store", "/internal/core/", "/internal/service/"}},
	{"drivers", rootPackage + "/memstore", []string{"/durabletype", "/store", "/internal/core/"}},
	{"drivers", rootPackage + "/pgstore", []string{"/durabletype", "/store", "/internal/core/"}},
	{"tools", rootPackage + "/internal/tools/", []string{"/durabletype", "/store", "/internal/core/", "/memstore", "/pgstore", "/internal/tools/"}},
}

// layerOf is the layer of a package of the module (the first whose prefix
// it has), or nil for one no rule covers (the root, the CLI, the API, the
// binaries).
func layerOf(path string) *layer {
	for i := range layers {
		l := &layers[i]
		if path == l.prefix || strings.HasPrefix(path, strings.TrimSuffix(l.prefix, "/")+"/") {
			return l
		}
	}
	return nil
}

// TestLayers enforces the module's floors: no package depends, directly or
// through another package, on one above its floor (layers). The core and
// the drivers never reach the engine's services, the root or the tools;
// the services never reach a driver. Test variants are held to the same
// rule (an external test package _test may import what its floor may, and
// the tools).
func TestLayers(t *testing.T) {
	t.Parallel()
	pkgs := goList(t, "-deps", "./...")
	for _, p := range pkgs {
		l := layerOf(p.ImportPath)
		if l == nil {
			continue
		}
		for _, dep := range p.Deps {
			if dep == p.ImportPath || !strings.HasPrefix(dep, rootPackage) {
				continue
			}
			rel := strings.TrimPrefix(dep, rootPackage)
			if !slices.ContainsFunc(l.allowed, func(a string) bool {
				return rel == a || strings.HasPrefix(rel, strings.TrimSuffix(a, "/")+"/")
			}) {
				t.Errorf("%s (%s) depends on %s, which is above its floor", p.ImportPath, l.name, dep)
			}
		}
	}
}

// TestInternalImportsNoRoot enforces the layering for tests too: no package
// under the module's top-level internal/ (nor its tests) imports the root
// package, directly or through other packages. What builds on the engine
// (the built-in workflows of the durable binary, its crash proofs) lives
// under cmd/durable/internal/.
func TestInternalImportsNoRoot(t *testing.T) {
	t.Parallel()
	// -deps -test: every package under internal/, its test variants and
	// everything they depend on, each with its direct imports and all its
	// dependencies.
	pkgs := goList(t, "-deps", "-test", "./internal/...")
	// base strips what go list appends to a package compiled for a test:
	// "p [q.test]" is p.
	base := func(path string) string {
		path, _, _ = strings.Cut(path, " ")
		return path
	}
	dependsOnRoot := map[string]bool{} // by import path as listed
	var internal []listedPackage
	for _, p := range pkgs {
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

// TestNoBinariesInGit keeps compiled programs out of the repository: no
// file git tracks starts with an executable's magic number (ELF, Mach-O,
// PE). Build them; ignore them.
func TestNoBinariesInGit(t *testing.T) {
	t.Parallel()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no git to list the tracked files")
		}
		t.Skip("no git to list the tracked files")
	}
	out, err := exec.Command(gitBin, "ls-files", "-z").Output()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("git ls-files: %v", err)
		}
		t.Skip("not a git checkout")
	}
	magics := [][]byte{{0x7f, 'E', 'L', 'F'}, {0xcf, 0xfa, 0xed, 0xfe}, {0xfe, 0xed, 0xfa, 0xcf}, {0xca, 0xfe, 0xba, 0xbe}, {'M', 'Z'}}
	var checked int
	for name := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		f, err := os.Open(name)
		if err != nil {
			continue // deleted in the work tree
		}
		head := make([]byte, 4)
		n, _ := io.ReadFull(bufio.NewReader(f), head)
		f.Close()
		checked++
		for _, m := range magics {
			if n >= len(m) && bytes.Equal(head[:len(m)], m) {
				t.Errorf("%s is a compiled binary: build it, ignore it (.gitignore), never commit it", name)
			}
		}
	}
	require.NotZero(t, checked, "git lists no file")
}

// listedPackage is what go list -json says of a package.
type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// goList runs go list -json with args in the module and decodes what it
// prints.
func goList(t *testing.T, args ...string) []listedPackage {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no go toolchain to list the packages")
		}
		t.Skip("no go toolchain to list the packages")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, append([]string{"list", "-json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list:\n%s", stderr.String())
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	require.NotEmpty(t, pkgs, "go list found no package")
	return pkgs
}
