package pyindex

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/codeagent/codeagent/internal/fixtureserver"
)

// Index is a PEP 503 simple repository on 127.0.0.1: /simple/ lists the
// projects, /simple/PROJECT/ its files (linked with #sha256=), and
// /files/FILENAME serves them. A non-normalised project URL redirects to
// the normalised one; an unknown project or file is 404.
type Index struct {
	*fixtureserver.Server
	projects map[string][]Dist // normalised name → dists, by file name
	files    map[string][]byte
	fileHits atomic.Int64
}

// New serves dists over HTTP until Close or the end of the test. Two
// dists with the same file name fail the test.
func New(t testing.TB, dists ...Dist) *Index {
	t.Helper()
	ix := index(t, dists)
	ix.Server = fixtureserver.New(t, ix.serve)
	return ix
}

// NewTLS is New over HTTPS with cert (see package testca).
func NewTLS(t testing.TB, cert tls.Certificate, dists ...Dist) *Index {
	t.Helper()
	ix := index(t, dists)
	ix.Server = fixtureserver.NewTLS(t, ix.serve, cert)
	return ix
}

func index(t testing.TB, dists []Dist) *Index {
	ix := &Index{projects: map[string][]Dist{}, files: map[string][]byte{}}
	for _, d := range dists {
		if err := checkFilename(d.Filename); err != nil {
			t.Fatal(err)
		}
		if d.Project == "" {
			t.Fatalf("pyindex: %s has no project", d.Filename)
		}
		if _, dup := ix.files[d.Filename]; dup {
			t.Fatalf("pyindex: file %s given twice", d.Filename)
		}
		ix.files[d.Filename] = d.Data
		p := Normalize(d.Project)
		ix.projects[p] = append(ix.projects[p], d)
	}
	for _, ds := range ix.projects {
		sort.Slice(ds, func(i, j int) bool { return ds[i].Filename < ds[j].Filename })
	}
	return ix
}

// URL is the simple index URL, e.g. http://127.0.0.1:PORT/simple/.
func (ix *Index) URL() string { return ix.Base() + "/simple/" }

// Files counts successful file downloads so far.
func (ix *Index) Files() int { return int(ix.fileHits.Load()) }

func (ix *Index) serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/simple" || p == "/":
		http.Redirect(w, r, "/simple/", http.StatusMovedPermanently)
	case p == "/simple/":
		ix.serveRoot(w)
	case strings.HasPrefix(p, "/simple/"):
		name := strings.TrimSuffix(strings.TrimPrefix(p, "/simple/"), "/")
		if name == "" || strings.Contains(name, "/") {
			http.NotFound(w, r)
			return
		}
		norm := Normalize(name)
		if _, ok := ix.projects[norm]; !ok {
			http.NotFound(w, r)
			return
		}
		if name != norm || !strings.HasSuffix(p, "/") {
			http.Redirect(w, r, "/simple/"+norm+"/", http.StatusMovedPermanently)
			return
		}
		ix.serveProject(w, norm)
	case strings.HasPrefix(p, "/files/"):
		data, ok := ix.files[strings.TrimPrefix(p, "/files/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		ix.fileHits.Add(1)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		if r.Method == http.MethodGet {
			_, _ = w.Write(data)
		}
	default:
		http.NotFound(w, r)
	}
}

const pageHead = "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\">" +
	"<title>%s</title></head><body><h1>%s</h1>\n"

func (ix *Index) serveRoot(w http.ResponseWriter) {
	names := make([]string, 0, len(ix.projects))
	for n := range ix.projects {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, pageHead, "Simple index", "Simple index")
	for _, n := range names {
		e := html.EscapeString(n)
		fmt.Fprintf(&b, "<a href=\"%s/\">%s</a><br/>\n", e, e)
	}
	b.WriteString("</body></html>\n")
	writeHTML(w, b.String())
}

func (ix *Index) serveProject(w http.ResponseWriter, norm string) {
	var b strings.Builder
	title := html.EscapeString("Links for " + norm)
	fmt.Fprintf(&b, pageHead, title, title)
	for _, d := range ix.projects[norm] {
		sum := sha256.Sum256(d.Data)
		href := html.EscapeString("../../files/" + url.PathEscape(d.Filename))
		fmt.Fprintf(&b, "<a href=\"%s#sha256=%s\">%s</a><br/>\n",
			href, hex.EncodeToString(sum[:]), html.EscapeString(d.Filename))
	}
	b.WriteString("</body></html>\n")
	writeHTML(w, b.String())
}

func writeHTML(w http.ResponseWriter, page string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(page))
}
