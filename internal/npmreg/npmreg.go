// Package npmreg serves npm packages made on the spot from a minimal npm
// registry on 127.0.0.1, for tests of the dependency installer, which
// have no internet: GET /NAME (and /@SCOPE%2fNAME) is the packument, GET
// /NAME/-/FILE.tgz the tarball. It counts requests, so that a test can
// tell that a cache hit asked nothing.
//
// A Package's scripts (postinstall, say) are what npm would run: install
// them only inside a sandbox, never on the host.
package npmreg

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codeagent/codeagent/internal/fixtureserver"
)

// Package is one version of an npm package.
type Package struct {
	Name    string // "left-pad" or "@scope/name"
	Version string
	// Files are the package's files (path: text) beside the package.json
	// made from the fields here; index.js is its main.
	Files        map[string]string
	Dependencies map[string]string
	Scripts      map[string]string
}

// epoch is every tarball member's time, so that the same package always
// gives the same bytes (and integrity).
var epoch = time.Date(1985, 10, 26, 8, 15, 0, 0, time.UTC)

// Tarball is p packed as npm packs it: a gzipped tar whose entries are
// below package/.
func Tarball(p Package) ([]byte, error) {
	if p.Name == "" || p.Version == "" || strings.ContainsAny(p.Version, "/\\ ") {
		return nil, fmt.Errorf("npmreg: bad name or version %q %q", p.Name, p.Version)
	}
	manifest, err := json.MarshalIndent(map[string]any{"name": p.Name, "version": p.Version, "main": "index.js",
		"dependencies": p.Dependencies, "scripts": p.Scripts}, "", "  ")
	if err != nil {
		return nil, err
	}
	files := map[string]string{"package.json": string(manifest) + "\n"}
	for name, text := range p.Files {
		if name == "package.json" || path.IsAbs(name) || path.Clean(name) != name || strings.HasPrefix(name, "../") {
			return nil, fmt.Errorf("npmreg: bad file path %q", name)
		}
		files[name] = text
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, n := range names {
		hdr := &tar.Header{Name: "package/" + n, Mode: 0o644, Size: int64(len(files[n])), ModTime: epoch, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Integrity is the Subresource Integrity string of data, as npm checks it.
func Integrity(data []byte) string {
	sum := sha512.Sum512(data)
	return "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

// Registry is the registry server.
type Registry struct {
	*fixtureserver.Server
	packages  map[string][]Package // name → versions
	tarballs  map[string][]byte    // URL path → tarball
	downloads atomic.Int64
}

// New serves pkgs over HTTP until Close or the end of the test.
func New(t testing.TB, pkgs ...Package) *Registry {
	t.Helper()
	r := registry(t, pkgs)
	r.Server = fixtureserver.New(t, r.serve)
	return r
}

// NewTLS is New over HTTPS with cert (see package testca).
func NewTLS(t testing.TB, cert tls.Certificate, pkgs ...Package) *Registry {
	t.Helper()
	r := registry(t, pkgs)
	r.Server = fixtureserver.NewTLS(t, r.serve, cert)
	return r
}

func registry(t testing.TB, pkgs []Package) *Registry {
	r := &Registry{packages: map[string][]Package{}, tarballs: map[string][]byte{}}
	for _, p := range pkgs {
		data, err := Tarball(p)
		if err != nil {
			t.Fatal(err)
		}
		file := tarballPath(p)
		if _, dup := r.tarballs[file]; dup {
			t.Fatalf("npmreg: %s@%s given twice", p.Name, p.Version)
		}
		r.tarballs[file] = data
		r.packages[p.Name] = append(r.packages[p.Name], p)
	}
	return r
}

// tarballPath is where p's tarball is served: /NAME/-/BASE-VERSION.tgz.
func tarballPath(p Package) string {
	return "/" + p.Name + "/-/" + path.Base(p.Name) + "-" + p.Version + ".tgz"
}

// URL is the registry's URL, http://127.0.0.1:PORT/.
func (r *Registry) URL() string { return r.Base() + "/" }

// Downloads counts the tarballs served so far.
func (r *Registry) Downloads() int { return int(r.downloads.Load()) }

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	p := req.URL.Path // a scoped name's %2f is a slash here
	if data, ok := r.tarballs[p]; ok {
		r.downloads.Add(1)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		if req.Method == http.MethodGet {
			_, _ = w.Write(data)
		}
		return
	}
	versions, ok := r.packages[strings.TrimPrefix(p, "/")]
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"Not found"}`))
		return
	}
	b, err := json.Marshal(r.packument(versions))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// packument is the document of a package's versions, the latest tagged.
func (r *Registry) packument(versions []Package) map[string]any {
	vs := map[string]any{}
	latest := versions[0].Version
	for _, p := range versions {
		file := tarballPath(p)
		data := r.tarballs[file]
		sha := sha1.Sum(data)
		vs[p.Version] = map[string]any{"name": p.Name, "version": p.Version, "dependencies": p.Dependencies,
			"scripts": p.Scripts, "dist": map[string]any{"tarball": r.Base() + file,
				"shasum": hex.EncodeToString(sha[:]), "integrity": Integrity(data)}}
		if newer(p.Version, latest) {
			latest = p.Version
		}
	}
	return map[string]any{"name": versions[0].Name, "versions": vs, "dist-tags": map[string]string{"latest": latest}}
}

// newer compares two dotted numeric versions (enough for tests).
func newer(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x > y
		}
	}
	return len(pa) > len(pb)
}
