package npmreg

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
)

func get(t *testing.T, u string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// The packument names each version's tarball with its integrity, the
// tarball's entries are below package/, a scoped name is found by its
// escaped slash, and requests are counted until Close.
func TestRegistry(t *testing.T) {
	r := New(t,
		Package{Name: "kiwi", Version: "1.0.0", Files: map[string]string{"index.js": "exports.x = 1\n"}},
		Package{Name: "kiwi", Version: "1.10.0", Files: map[string]string{"index.js": "exports.x = 2\n"}},
		Package{Name: "@birds/emu", Version: "0.1.0", Dependencies: map[string]string{"kiwi": "^1.0.0"}})
	code, b := get(t, r.URL()+"kiwi")
	var doc struct {
		Name     string            `json:"name"`
		DistTags map[string]string `json:"dist-tags"`
		Versions map[string]struct {
			Dist struct{ Tarball, Integrity string }
		}
	}
	if err := json.Unmarshal(b, &doc); code != 200 || err != nil || doc.Name != "kiwi" || doc.DistTags["latest"] != "1.10.0" || len(doc.Versions) != 2 {
		t.Fatalf("packument %d %s", code, b)
	}
	dist := doc.Versions["1.10.0"].Dist
	code, tgz := get(t, dist.Tarball)
	if code != 200 || Integrity(tgz) != dist.Integrity {
		t.Fatalf("tarball %d, integrity %s, want %s", code, Integrity(tgz), dist.Integrity)
	}
	gz, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if len(names) != 2 || names[0] != "package/index.js" || names[1] != "package/package.json" {
		t.Errorf("entries %v", names)
	}
	if code, b := get(t, r.URL()+url.PathEscape("@birds/emu")); code != 200 || !bytes.Contains(b, []byte(`"kiwi":"^1.0.0"`)) {
		t.Errorf("scoped packument %d %s", code, b)
	}
	if code, _ := get(t, r.URL()+"moa"); code != 404 {
		t.Errorf("unknown package: %d", code)
	}
	if r.Requests() != 4 || r.Downloads() != 1 {
		t.Errorf("%d requests, %d downloads", r.Requests(), r.Downloads())
	}
	r.Close()
	if _, err := http.Get(r.URL() + "kiwi"); err == nil {
		t.Error("the registry answers after Close")
	}
}
