package repocheck

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Go builds a file whose name ends in _GOOS or _GOARCH (before _test)
// only for that platform. codeagent builds for linux on amd64 and arm64:
// a file named for another (deps_js_test.go: GOOS=js) is never compiled,
// and its tests pass by never running. These are go/build's lists.
var (
	otherOS = strings.Fields("aix android darwin dragonfly freebsd hurd illumos ios js nacl netbsd openbsd plan9 solaris wasip1 windows zos")
	// amd64 and arm64 are built (sandbox/namespace's seccomp tables).
	otherArch = strings.Fields("386 amd64p32 arm armbe arm64be loong64 mips mipsle mips64 mips64le mips64p32 mips64p32le ppc ppc64 ppc64le riscv riscv64 s390 s390x sparc sparc64 wasm")
)

// TestNoFileNamedForAnotherPlatform fails on a Go file that this project
// would never compile because of its name.
func TestNoFileNamedForAnotherPlatform(t *testing.T) {
	other := map[string]bool{}
	for _, s := range append(otherOS, otherArch...) {
		other[s] = true
	}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "vendor" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return fs.SkipDir
		}
		name, ok := strings.CutSuffix(d.Name(), ".go")
		if d.IsDir() || !ok {
			return nil
		}
		// As go/build reads a name: its last part, or its last two
		// (_GOOS_GOARCH).
		parts := strings.Split(strings.TrimSuffix(name, "_test"), "_")[1:]
		n := len(parts)
		switch {
		case n >= 1 && other[parts[n-1]]:
			t.Errorf("%s: Go compiles it only for %s, never here; rename it", path, parts[n-1])
		case n >= 2 && (parts[n-1] == "amd64" || parts[n-1] == "arm64") && other[parts[n-2]]:
			t.Errorf("%s: Go compiles it only for %s, never here; rename it", path, parts[n-2])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
