package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/workspace"
)

// Bounds on paths in the API.
const (
	maxPathLen    = 1024
	maxSegmentLen = 255
	maxListed     = 5000
)

// fileJSON is one workspace file in a listing.
type fileJSON struct {
	Path        string    `json:"path"`
	Size        int64     `json:"size"`
	Modified    time.Time `json:"modified"`
	ContentType string    `json:"content_type"`
}

// validPath checks a slash-separated relative path from a request: no
// absolute path, no empty, "." or ".." segment, no control characters or
// backslashes, valid UTF-8, bounded length.
func validPath(p string) error {
	if p == "" || len(p) > maxPathLen || !utf8.ValidString(p) || strings.HasPrefix(p, "/") || strings.ContainsRune(p, '\\') {
		return badRequest("invalid file path %q", p)
	}
	for _, r := range p {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return badRequest("invalid file path %q: control character", p)
		}
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." || len(seg) > maxSegmentLen {
			return badRequest("invalid file path %q", p)
		}
	}
	return nil
}

// contentType is how a workspace file is served: PNG, JPEG, GIF and SVG
// as images (inline), everything else as a download.
func contentType(name string) (ct string, inline bool) {
	switch strings.ToLower(path.Ext(name)) {
	case ".png":
		return "image/png", true
	case ".jpg", ".jpeg":
		return "image/jpeg", true
	case ".gif":
		return "image/gif", true
	case ".svg":
		return "image/svg+xml", true
	}
	return "application/octet-stream", false
}

// sessionRoot opens the caller's session's workspace, refusing changes
// while a run is using it when write is set.
func (s *Server) sessionRoot(r *http.Request, write bool) (*os.Root, string, error) {
	o, err := s.session(r)
	if err != nil {
		return nil, "", err
	}
	if write {
		if err := s.workspaceFree(r.Context(), o.ID); err != nil {
			return nil, "", err
		}
	}
	ws, err := s.sessionWorkspace(o.Owner, o.ID)
	if err != nil {
		return nil, "", err
	}
	root, err := os.OpenRoot(ws.Dir)
	if err != nil {
		return nil, "", fmt.Errorf("workspace: %w", err)
	}
	return root, ws.Dir, nil
}

// workspaceFree refuses changes to session id's workspace while a run, of
// this server or another process, is using it.
func (s *Server) workspaceFree(ctx context.Context, id string) error {
	if s.runs.activeIn(id) != "" {
		return conflict("a run is using the session's workspace; wait for it or cancel it")
	}
	if l, live, err := s.deps.Store.SessionLease(ctx, id); err == nil && live {
		return conflict("a run of another codeagent process (%s) is using the session's workspace", l.Owner.Describe())
	}
	return nil
}

func (s *Server) handleListFiles(w http.ResponseWriter, r *http.Request) {
	root, dir, err := s.sessionRoot(r, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	root.Close()
	ws := &workspace.Workspace{Dir: dir}
	snap, err := ws.Snapshot(workspace.Limits{MaxEntries: maxListed})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	files := make([]fileJSON, 0, len(snap.Files))
	for p, st := range snap.Files {
		ct, _ := contentType(p)
		files = append(files, fileJSON{Path: p, Size: st.Size, Modified: time.Unix(0, st.ModTime).UTC(), ContentType: ct})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	writeJSON(w, http.StatusOK, map[string]any{"files": files, "truncated": snap.Truncated})
}

// startUpload opens the request's session workspace for an upload, in
// its turn (see beginUpload); end closes both.
func (s *Server) startUpload(r *http.Request) (*upload, func(), error) {
	root, dir, err := s.sessionRoot(r, true)
	if err != nil {
		return nil, nil, err
	}
	up, err := s.beginUpload(r.Context(), root, dir)
	if err != nil {
		root.Close()
		return nil, nil, err
	}
	return up, func() { up.end(); root.Close() }, nil
}

// handleUploadRaw stores the request body as the file name.
func (s *Server) handleUploadRaw(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := app.CheckFileName(name); err != nil {
		s.writeError(w, r, err)
		return
	}
	up, end, err := s.startUpload(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer end()
	var files []fileJSON
	err = up.add(name, http.MaxBytesReader(w, r.Body, s.cfg.MaxUpload))
	if err == nil {
		files, err = up.commit()
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"files": files})
}

// handleUploadMultipart stores each file part of a multipart/form-data body.
func (s *Server) handleUploadMultipart(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxUpload+1<<20)
	mr, err := r.MultipartReader()
	if err != nil {
		s.writeError(w, r, badRequest("want a multipart/form-data body: %v", err))
		return
	}
	up, end, err := s.startUpload(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer end()
	// Every part counts against the cap, fields too, so that a flood of
	// them is no cheaper; files are stored only when all have fit.
	for parts := 0; ; parts++ {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.writeError(w, r, uploadError(err))
			return
		}
		if parts >= s.cfg.MaxUploadFiles {
			s.writeError(w, r, tooManyFiles(s.cfg.MaxUploadFiles))
			return
		}
		// The raw file name, not part.FileName(), which drops directories
		// and would accept "../x" as "x".
		_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		name, isFile := params["filename"]
		if !isFile {
			part.Close()
			continue
		}
		if err := app.CheckFileName(name); err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := up.add(name, part); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if len(up.files) == 0 {
		s.writeError(w, r, badRequest("no file in the multipart body"))
		return
	}
	stored, err := up.commit()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"files": stored})
}

func uploadError(err error) error {
	var mb *http.MaxBytesError
	var se errStore
	if errors.As(err, &mb) || errors.As(err, &se) {
		return err // too large, or the server's failure (a full disk: 507)
	}
	return badRequest("reading the upload: %v", publicMessage(err.Error()))
}

// fileRoot is the request's file path, checked, and its session's
// workspace root (see sessionRoot) to find it in.
func (s *Server) fileRoot(r *http.Request, write bool) (string, *os.Root, string, error) {
	p := r.PathValue("path")
	if err := validPath(p); err != nil {
		return "", nil, "", err
	}
	root, dir, err := s.sessionRoot(r, write)
	return p, root, dir, err
}

// handleDownload serves a workspace file: images inline (SVG under a CSP
// sandbox, so that its scripts cannot run), everything else as an
// attachment; ?download=1 makes any file an attachment.
func (s *Server) handleDownload(w http.ResponseWriter, r *http.Request) {
	p, root, dir, err := s.fileRoot(r, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	root.Close()
	// No link is followed at any component of p: what is served is a
	// regular file the program left in the workspace itself.
	f, fi, err := (&workspace.Workspace{Dir: dir}).OpenRegular(p)
	if err != nil {
		s.writeError(w, r, notFound("file"))
		return
	}
	defer f.Close()
	ct, inline := contentType(p)
	disp := "attachment"
	if inline && r.URL.Query().Get("download") == "" {
		disp = "inline"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	if cd := mime.FormatMediaType(disp, map[string]string{"filename": path.Base(p)}); cd != "" {
		h.Set("Content-Disposition", cd)
	} else {
		h.Set("Content-Disposition", disp)
	}
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; sandbox")
	h.Set("Cache-Control", "private, no-cache")
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

func (s *Server) handleDeleteFile(w http.ResponseWriter, r *http.Request) {
	p, root, _, err := s.fileRoot(r, true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer root.Close()
	if _, err := root.Lstat(p); err != nil {
		s.writeError(w, r, notFound("file"))
		return
	}
	if err := root.RemoveAll(p); err != nil {
		s.writeError(w, r, fmt.Errorf("delete %s: %w", p, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
