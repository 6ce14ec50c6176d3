// Package pyindex makes Python packages and a package index on the spot
// for tests of the dependency installer, which have no internet: Wheel and
// Sdist build distributions in memory, New serves them as a PEP 503 simple
// repository on 127.0.0.1, and WriteWheelhouse lays them out for pip's
// --find-links.
//
// Sdist archives carry a setup.py that pip would run: install them only
// inside a sandbox, never on the host.
//
// PEP 668: Debian's pip 23.0.1 with /usr/lib/python3.11/EXTERNALLY-MANAGED
// does not need --break-system-packages with --target (nor --prefix or
// --root): pip skips the externally-managed check for those, as the tests
// here confirm; a plain "pip install" into the system is refused with
// error: externally-managed-environment.
package pyindex

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Dist is one distribution file of a project.
type Dist struct {
	Project  string // project name, as in Requires-Dist; normalised when served
	Filename string // e.g. seabird-1.0-py3-none-any.whl
	Data     []byte
}

// epoch is the fixed timestamp of every archive member, so that the same
// inputs always give the same bytes (and the same hashes).
var epoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

var separators = regexp.MustCompile(`[-_.]+`)

// Normalize returns the PEP 503 form of a project name: lowercase, each
// run of -, _ and . replaced by one -.
func Normalize(name string) string {
	return strings.ToLower(separators.ReplaceAllString(name, "-"))
}

// escapeName is the file-name form of a project name (wheel spec, PEP
// 625): the normalised name with _ for -.
func escapeName(name string) string {
	return strings.ReplaceAll(Normalize(name), "-", "_")
}

func checkNameVersion(name, version string) error {
	if name == "" || version == "" {
		return errors.New("pyindex: empty name or version")
	}
	if strings.ContainsAny(name+version, "/\\ \t\r\n") {
		return fmt.Errorf("pyindex: bad name or version %q %q", name, version)
	}
	return nil
}

// checkMember rejects archive paths that are absolute or leave the root.
func checkMember(p string) error {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == ".." ||
		strings.HasPrefix(p, "../") || strings.Contains(p, "\\") {
		return fmt.Errorf("pyindex: bad file path %q", p)
	}
	return nil
}

// Wheel builds a pure-Python wheel (PEP 427) holding files (path: text)
// plus the .dist-info METADATA, WHEEL and RECORD. Each requires entry
// becomes one Requires-Dist line. Equal inputs give equal bytes.
func Wheel(name, version string, files map[string]string, requires []string) (filename string, data []byte, err error) {
	if err := checkNameVersion(name, version); err != nil {
		return "", nil, err
	}
	base := escapeName(name) + "-" + strings.ReplaceAll(version, "-", "_")
	info := base + ".dist-info/"
	var meta strings.Builder
	fmt.Fprintf(&meta, "Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version)
	for _, r := range requires {
		if strings.ContainsAny(r, "\r\n") {
			return "", nil, fmt.Errorf("pyindex: bad requirement %q", r)
		}
		fmt.Fprintf(&meta, "Requires-Dist: %s\n", r)
	}
	wheel := "Wheel-Version: 1.0\nGenerator: codeagent-pyindex\nRoot-Is-Purelib: true\nTag: py3-none-any\n"

	names := make([]string, 0, len(files))
	for p := range files {
		if err := checkMember(p); err != nil {
			return "", nil, err
		}
		if strings.HasPrefix(p, info) {
			return "", nil, fmt.Errorf("pyindex: %q is generated", p)
		}
		names = append(names, p)
	}
	sort.Strings(names)
	all := map[string]string{info + "METADATA": meta.String(), info + "WHEEL": wheel}
	for _, p := range names {
		all[p] = files[p]
	}
	names = append(names, info+"METADATA", info+"WHEEL")

	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record bytes.Buffer
	rw := csv.NewWriter(&record)
	for _, p := range names {
		body := []byte(all[p])
		sum := sha256.Sum256(body)
		hash := "sha256=" + base64.RawURLEncoding.EncodeToString(sum[:])
		if err := rw.Write([]string{p, hash, fmt.Sprint(len(body))}); err != nil {
			return "", nil, err
		}
		if err := addZip(zw, p, body); err != nil {
			return "", nil, err
		}
	}
	if err := rw.Write([]string{info + "RECORD", "", ""}); err != nil {
		return "", nil, err
	}
	rw.Flush()
	if err := rw.Error(); err != nil {
		return "", nil, err
	}
	if err := addZip(zw, info+"RECORD", record.Bytes()); err != nil {
		return "", nil, err
	}
	if err := zw.Close(); err != nil {
		return "", nil, err
	}
	return base + "-py3-none-any.whl", buf.Bytes(), nil
}

func addZip(zw *zip.Writer, name string, body []byte) error {
	h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: epoch}
	h.SetMode(0o644)
	w, err := zw.CreateHeader(h)
	if err != nil {
		return err
	}
	_, err = w.Write(body)
	return err
}

// Sdist builds a source distribution NAME-VERSION.tar.gz (name escaped as
// in wheel names) holding NAME-VERSION/setup.py (setupPy verbatim),
// PKG-INFO and a package directory with an empty __init__.py. setup.py
// runs on install: use only inside a sandbox.
func Sdist(name, version, setupPy string) (filename string, data []byte, err error) {
	if err := checkNameVersion(name, version); err != nil {
		return "", nil, err
	}
	root := escapeName(name) + "-" + version
	pkg := escapeName(name)
	pkgInfo := fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version)
	entries := []struct {
		name, body string
		dir        bool
	}{
		{root + "/", "", true},
		{root + "/PKG-INFO", pkgInfo, false},
		{root + "/setup.py", setupPy, false},
		{root + "/" + pkg + "/", "", true},
		{root + "/" + pkg + "/__init__.py", "", false},
	}
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return "", nil, err
	}
	gz.ModTime = epoch
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, ModTime: epoch, Mode: 0o644,
			Typeflag: tar.TypeReg, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			return "", nil, err
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			return "", nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return "", nil, err
	}
	if err := gz.Close(); err != nil {
		return "", nil, err
	}
	return root + ".tar.gz", buf.Bytes(), nil
}

// WriteWheelhouse writes each dist's file into dir (created if missing),
// a flat directory for pip --find-links.
func WriteWheelhouse(dir string, dists ...Dist) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range dists {
		if err := checkFilename(d.Filename); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, d.Filename), d.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func checkFilename(f string) error {
	if f == "" || f == "." || f == ".." || strings.ContainsAny(f, "/\\#?%") {
		return fmt.Errorf("pyindex: bad file name %q", f)
	}
	return nil
}
