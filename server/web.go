package server

import (
	"embed"
	"net/http"
	"path"
)

//go:embed openapi.yaml
var openapiYAML []byte

//go:embed web/index.html web/app.js web/runs.js web/approvals.js web/style.css
var webFS embed.FS

// pageCSP allows the page its own scripts, styles and fetches, and images
// from blob: URLs (artifacts fetched with the API key); nothing else.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var assetTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// handlePage serves the page; on a server with a local token, /?token=
// logs the browser in (see login).
func (s *Server) handlePage(w http.ResponseWriter, r *http.Request) {
	if s.cfg.LocalToken != "" && r.URL.Query().Has("token") {
		s.login(w, r)
		return
	}
	s.serveAsset(w, r, "index.html")
}

func (s *Server) handleAsset(w http.ResponseWriter, r *http.Request) {
	s.serveAsset(w, r, r.PathValue("file"))
}

func (s *Server) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	ct, ok := assetTypes[path.Ext(name)]
	data, err := webFS.ReadFile("web/" + name)
	if !ok || err != nil {
		s.writeError(w, r, notFound("page"))
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Security-Policy", pageCSP)
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(data)
}

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
	_, _ = w.Write(openapiYAML)
}
