package pyindex

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func wheel(t *testing.T, name, version string, files map[string]string, requires ...string) Dist {
	t.Helper()
	f, data, err := Wheel(name, version, files, requires)
	if err != nil {
		t.Fatal(err)
	}
	return Dist{Project: name, Filename: f, Data: data}
}

// birds is seabird 1.0, which requires gull and Tern.Bird: three wheels.
func birds(t *testing.T) []Dist {
	return []Dist{
		wheel(t, "seabird", "1.0", map[string]string{"seabird/__init__.py": "VALUE = 42\n"},
			"gull>=0.5", "Tern.Bird"),
		wheel(t, "gull", "0.9", map[string]string{"gull/__init__.py": "NAME = 'gull'\n"}),
		wheel(t, "Tern.Bird", "2.0", map[string]string{"tern_bird/__init__.py": ""}),
	}
}

func readZip(t *testing.T, data []byte) map[string]string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name] = string(b)
	}
	return out
}

func TestWheel(t *testing.T) {
	d := birds(t)[0]
	if d.Filename != "seabird-1.0-py3-none-any.whl" {
		t.Errorf("filename %q", d.Filename)
	}
	files := readZip(t, d.Data)
	const info = "seabird-1.0.dist-info/"
	if files["seabird/__init__.py"] != "VALUE = 42\n" {
		t.Errorf("module: %q", files["seabird/__init__.py"])
	}
	wantMeta := "Metadata-Version: 2.1\nName: seabird\nVersion: 1.0\n" +
		"Requires-Dist: gull>=0.5\nRequires-Dist: Tern.Bird\n"
	if files[info+"METADATA"] != wantMeta {
		t.Errorf("METADATA:\n%s", files[info+"METADATA"])
	}
	for _, l := range []string{"Wheel-Version: 1.0", "Generator: ", "Root-Is-Purelib: true", "Tag: py3-none-any"} {
		if !strings.Contains(files[info+"WHEEL"], l) {
			t.Errorf("WHEEL lacks %q:\n%s", l, files[info+"WHEEL"])
		}
	}
	rows, err := csv.NewReader(strings.NewReader(files[info+"RECORD"])).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r[0]] = true
		body, ok := files[r[0]]
		switch {
		case !ok:
			t.Errorf("RECORD lists missing %s", r[0])
		case r[0] == info+"RECORD":
			if r[1] != "" || r[2] != "" {
				t.Errorf("RECORD row for itself: %q", r)
			}
		default:
			sum := sha256.Sum256([]byte(body))
			if want := "sha256=" + base64.RawURLEncoding.EncodeToString(sum[:]); r[1] != want {
				t.Errorf("%s: hash %s, want %s", r[0], r[1], want)
			}
			if r[2] != strconv.Itoa(len(body)) {
				t.Errorf("%s: size %s, want %d", r[0], r[2], len(body))
			}
		}
	}
	for name := range files {
		if !seen[name] {
			t.Errorf("RECORD lacks %s", name)
		}
	}
	if again := birds(t)[0]; !bytes.Equal(again.Data, d.Data) {
		t.Error("same inputs gave different wheels")
	}
}

func TestWheelNames(t *testing.T) {
	d := wheel(t, "Tern.-Bird__x", "2.0", map[string]string{"tb/__init__.py": ""})
	if d.Filename != "tern_bird_x-2.0-py3-none-any.whl" {
		t.Errorf("filename %q", d.Filename)
	}
	if _, ok := readZip(t, d.Data)["tern_bird_x-2.0.dist-info/METADATA"]; !ok {
		t.Error("dist-info not named tern_bird_x-2.0.dist-info")
	}
	if got := Normalize("Tern.-Bird__x"); got != "tern-bird-x" {
		t.Errorf("Normalize: %q", got)
	}
	for _, p := range []string{"../x.py", "/abs.py", "a/../b.py", "a//b.py", "x-1.0.dist-info/RECORD"} {
		if _, _, err := Wheel("x", "1.0", map[string]string{p: ""}, nil); err == nil {
			t.Errorf("path %q accepted", p)
		}
	}
	if _, _, err := Wheel("", "1.0", nil, nil); err == nil {
		t.Error("empty name accepted")
	}
}

// TestSdist reads the archive back in Go only: its setup.py is never run.
func TestSdist(t *testing.T) {
	const setup = "raise SystemExit('must not run outside a sandbox')\n"
	name, data, err := Sdist("Sea-Bird", "1.0", setup)
	if err != nil {
		t.Fatal(err)
	}
	if name != "sea_bird-1.0.tar.gz" {
		t.Errorf("filename %q", name)
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
	}
	const root = "sea_bird-1.0/"
	if got[root+"setup.py"] != setup {
		t.Errorf("setup.py: %q", got[root+"setup.py"])
	}
	if got[root+"PKG-INFO"] != "Metadata-Version: 2.1\nName: Sea-Bird\nVersion: 1.0\n" {
		t.Errorf("PKG-INFO: %q", got[root+"PKG-INFO"])
	}
	for _, n := range []string{root, root + "sea_bird/", root + "sea_bird/__init__.py"} {
		if _, ok := got[n]; !ok {
			t.Errorf("missing %s in %v", n, got)
		}
	}
}

func get(t *testing.T, c *http.Client, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

func TestIndex(t *testing.T) {
	ds := birds(t)
	ix := New(t, ds...)
	base := strings.TrimSuffix(ix.URL(), "simple/")
	if !strings.HasPrefix(ix.URL(), "http://127.0.0.1:") || !strings.HasSuffix(ix.URL(), "/simple/") ||
		base != "http://"+ix.Host()+"/" {
		t.Fatalf("URL %s, Host %s", ix.URL(), ix.Host())
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	code, body, _ := get(t, c, ix.URL())
	for _, p := range []string{`href="seabird/"`, `href="gull/"`, `href="tern-bird/"`} {
		if code != 200 || !strings.Contains(body, p) {
			t.Errorf("/simple/: %d lacks %s:\n%s", code, p, body)
		}
	}
	sum := sha256.Sum256(ds[2].Data)
	link := `<a href="../../files/tern_bird-2.0-py3-none-any.whl#sha256=` + hex.EncodeToString(sum[:]) +
		`">tern_bird-2.0-py3-none-any.whl</a>`
	code, body, _ = get(t, c, ix.URL()+"tern-bird/")
	if code != 200 || !strings.Contains(body, link) {
		t.Errorf("project page %d:\n%s", code, body)
	}
	for _, p := range []string{"Tern.Bird/", "tern_bird/", "tern-bird"} {
		code, _, h := get(t, c, ix.URL()+p)
		if code != http.StatusMovedPermanently || h.Get("Location") != "/simple/tern-bird/" {
			t.Errorf("%s: %d to %q", p, code, h.Get("Location"))
		}
	}
	if code, follow, _ := get(t, http.DefaultClient, ix.URL()+"Tern.Bird/"); code != 200 || follow != body {
		t.Errorf("followed redirect: %d\n%s", code, follow)
	}
	code, body, h := get(t, c, base+"files/"+ds[2].Filename)
	if code != 200 || body != string(ds[2].Data) || h.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("file: %d %s", code, h.Get("Content-Type"))
	}
	for _, u := range []string{ix.URL() + "nope/", base + "files/nope.whl", base + "other"} {
		if code, _, _ := get(t, c, u); code != 404 {
			t.Errorf("%s: %d", u, code)
		}
	}
	if ix.Requests() != 11 || ix.Files() != 1 {
		t.Errorf("Requests %d, Files %d; want 11, 1", ix.Requests(), ix.Files())
	}
	ix.Close()
	ix.Close()
	if conn, err := net.DialTimeout("tcp", ix.Host(), 2*time.Second); err == nil {
		conn.Close()
		t.Error("port still open after Close")
	}
}

func TestWriteWheelhouse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wh")
	ds := birds(t)
	if err := WriteWheelhouse(dir, ds...); err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if b, err := os.ReadFile(filepath.Join(dir, d.Filename)); err != nil || !bytes.Equal(b, d.Data) {
			t.Errorf("%s: %v", d.Filename, err)
		}
	}
	if err := WriteWheelhouse(dir, Dist{Filename: "../x.whl"}); err == nil {
		t.Error("../x.whl accepted")
	}
}

const python = "/usr/bin/python3"

// pipEnv is the environment minus proxies, pip and Python settings, with a
// fresh HOME and no pip configuration.
func pipEnv(t *testing.T) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		u := strings.ToUpper(k)
		if strings.HasSuffix(u, "_PROXY") || strings.HasPrefix(u, "PIP_") ||
			strings.HasPrefix(u, "PYTHON") || u == "HOME" || strings.HasPrefix(u, "XDG_") {
			continue
		}
		env = append(env, kv)
	}
	home := t.TempDir()
	return append(env, "NO_PROXY=*", "no_proxy=*", "HOME="+home, "XDG_CACHE_HOME="+home+"/.cache",
		"XDG_CONFIG_HOME="+home+"/.config", "PIP_CONFIG_FILE=/dev/null", "PYTHONNOUSERSITE=1")
}

// run runs python with args (bounded to 60 s) and returns its output.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Env = pipEnv(t)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func needPip(t *testing.T) {
	t.Helper()
	if out, err := run(t, "-m", "pip", "--version"); err != nil {
		t.Skipf("no pip: %v %s", err, out)
	}
}

var pipInstall = []string{"-m", "pip", "install", "--no-input", "--disable-pip-version-check",
	"--no-cache-dir", "--only-binary", ":all:"}

// checkBirds checks that target holds the three birds and that they import.
func checkBirds(t *testing.T, target string) {
	t.Helper()
	for _, p := range []string{"seabird/__init__.py", "gull/__init__.py", "tern_bird/__init__.py",
		"seabird-1.0.dist-info/RECORD", "gull-0.9.dist-info/METADATA", "tern_bird-2.0.dist-info/WHEEL"} {
		if _, err := os.Stat(filepath.Join(target, p)); err != nil {
			t.Error(err)
		}
	}
	out, err := run(t, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "+
		"import seabird, gull, tern_bird; print(seabird.VALUE, gull.NAME)", target)
	if err != nil || strings.TrimSpace(out) != "42 gull" {
		t.Errorf("import: %v %s", err, out)
	}
}

// TestPipIndex installs seabird, which pulls in its two requirements, from
// the loopback index with the host's pip; no --break-system-packages.
func TestPipIndex(t *testing.T) {
	needPip(t)
	ix := New(t, birds(t)...)
	target := t.TempDir()
	args := slices.Concat(pipInstall, []string{"--target", target, "--index-url", ix.URL(), "seabird==1.0"})
	start := time.Now()
	out, err := run(t, args...)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("pip: %v\n%s", err, out)
	}
	t.Logf("pip install of 3 wheels from %s took %v (%d requests, %d files)",
		ix.URL(), took.Round(time.Millisecond), ix.Requests(), ix.Files())
	if ix.Files() != 3 {
		t.Errorf("Files %d, want 3", ix.Files())
	}
	checkBirds(t, target)
}

// TestPipFindLinks installs from a wheelhouse with --no-index.
func TestPipFindLinks(t *testing.T) {
	needPip(t)
	dir := t.TempDir()
	if err := WriteWheelhouse(dir, birds(t)...); err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	args := slices.Concat(pipInstall, []string{"--target", target, "--no-index", "--find-links", dir, "seabird==1.0"})
	start := time.Now()
	out, err := run(t, args...)
	if err != nil {
		t.Fatalf("pip: %v\n%s", err, out)
	}
	t.Logf("pip install of 3 wheels with --find-links took %v", time.Since(start).Round(time.Millisecond))
	checkBirds(t, target)
}

// TestPipExternallyManaged records PEP 668 on this host: with the marker
// file, pip refuses an install into the system (checked with --dry-run, so
// nothing is installed either way) while --target needs no override.
func TestPipExternallyManaged(t *testing.T) {
	needPip(t)
	out, err := run(t, "-I", "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))")
	if err != nil {
		t.Fatal(err, out)
	}
	marker := filepath.Join(strings.TrimSpace(out), "EXTERNALLY-MANAGED")
	if _, err := os.Stat(marker); err != nil {
		t.Skipf("not externally managed: %v", err)
	}
	dir := t.TempDir()
	if err := WriteWheelhouse(dir, birds(t)...); err != nil {
		t.Fatal(err)
	}
	args := slices.Concat(pipInstall, []string{"--dry-run", "--no-index", "--find-links", dir, "seabird==1.0"})
	out, err = run(t, args...)
	if err == nil || !strings.Contains(out, "externally-managed-environment") {
		t.Errorf("system install not refused: %v\n%s", err, out)
	}
}
