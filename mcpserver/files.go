package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// maxListed bounds the entries list_files walks.
const maxListed = 5000

// sessionWorkspace is the workspace of req's session for a call that only
// reads it; done ends the call.
func (s *Server) sessionWorkspace(ctx context.Context, req *mcp.CallToolRequest) (*workspace.Workspace, func(), error) {
	st, _, done, err := s.session(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	ws, err := s.workspace(st)
	if err != nil {
		done()
		return nil, nil, err
	}
	return ws, done, nil
}

func (s *Server) listFiles(ctx context.Context, req *mcp.CallToolRequest, _ ListFilesInput) (*mcp.CallToolResult, ListFilesOutput, error) {
	out := ListFilesOutput{Files: []FileInfo{}}
	ws, done, err := s.sessionWorkspace(ctx, req)
	if err != nil {
		return nil, out, err
	}
	defer done()
	snap, err := ws.Snapshot(workspace.Limits{MaxEntries: maxListed})
	if err != nil {
		return nil, out, err
	}
	for p, f := range snap.Files {
		out.Files = append(out.Files, FileInfo{Path: p, Size: f.Size, Modified: time.Unix(0, f.ModTime).UTC().Format(time.RFC3339)})
	}
	sort.Slice(out.Files, func(i, j int) bool { return out.Files[i].Path < out.Files[j].Path })
	out.Truncated = snap.Truncated
	return nil, out, nil
}

func (s *Server) readFile(ctx context.Context, req *mcp.CallToolRequest, in ReadFileInput) (*mcp.CallToolResult, ReadFileOutput, error) {
	var out ReadFileOutput
	if err := validPath(in.Path); err != nil {
		return nil, out, err
	}
	ws, done, err := s.sessionWorkspace(ctx, req)
	if err != nil {
		return nil, out, err
	}
	defer done()
	data, err := readRegular(ws.Dir, in.Path, s.cfg.MaxFile)
	if err != nil {
		return nil, out, fmt.Errorf("read %s: %w", in.Path, err)
	}
	out = ReadFileOutput{Path: in.Path, Size: int64(len(data))}
	if utf8.Valid(data) {
		out.Content = string(data)
	} else {
		out.ContentBase64 = base64.StdEncoding.EncodeToString(data)
	}
	var images []mcp.Content
	if mt := imageType(in.Path); mt != "" && int64(len(data)) <= s.cfg.MaxImage {
		images = append(images, &mcp.ImageContent{Data: data, MIMEType: mt})
	}
	res, err := resultWith(out, images)
	return res, out, err
}

func (s *Server) writeFile(ctx context.Context, req *mcp.CallToolRequest, in WriteFileInput) (*mcp.CallToolResult, WriteFileOutput, error) {
	var out WriteFileOutput
	if err := app.CheckFileName(in.Name); err != nil {
		return nil, out, err
	}
	data := []byte(in.Content)
	if in.ContentBase64 != "" {
		if in.Content != "" {
			return nil, out, argError("give content or content_base64, not both")
		}
		if int64(len(in.ContentBase64)) > s.cfg.MaxFile/3*4+4 {
			return nil, out, argError("the file is larger than %s", sandbox.FormatSize(s.cfg.MaxFile))
		}
		var err error
		if data, err = base64.StdEncoding.DecodeString(in.ContentBase64); err != nil {
			return nil, out, argError("content_base64: %v", err)
		}
	}
	if int64(len(data)) > s.cfg.MaxFile {
		return nil, out, argError("the file is larger than %s", sandbox.FormatSize(s.cfg.MaxFile))
	}
	st, ctx, done, err := s.session(ctx, req)
	if err != nil {
		return nil, out, err
	}
	defer done()
	ws, unlock, err := s.lockedWorkspace(ctx, st, nil)
	if err != nil {
		return nil, out, err
	}
	defer unlock()
	if err := s.checkQuota(ws, map[string]int64{in.Name: int64(len(data))}); err != nil {
		return nil, out, err
	}
	if err := ws.WriteFile(in.Name, data); err != nil {
		return nil, out, err
	}
	return nil, WriteFileOutput{Path: in.Name, Size: int64(len(data))}, nil
}

// images reads the image files among arts, within the server's caps, as
// image content, and returns them with their paths.
func (s *Server) images(ws *workspace.Workspace, arts []workspace.Artifact) ([]mcp.Content, []string) {
	var out []mcp.Content
	var names []string
	var total int64
	for _, a := range arts {
		mt := imageType(a.Path)
		if mt == "" || a.Size > s.cfg.MaxImage || total+a.Size > s.cfg.MaxImageTotal || len(out) >= s.cfg.MaxImages {
			continue
		}
		data, err := readRegular(ws.Dir, a.Path, s.cfg.MaxImage)
		if err != nil {
			s.log.Debug("image not returned", "path", a.Path, "err", err)
			continue
		}
		total += int64(len(data))
		out = append(out, &mcp.ImageContent{Data: data, MIMEType: mt})
		names = append(names, a.Path)
	}
	return out, names
}

// imageType is the MIME type of an image file name, or "".
func imageType(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".gif":
		return "image/gif"
	case ".svg":
		return "image/svg+xml"
	}
	return ""
}

// readRegular reads the regular file rel inside dir, never following a
// link at any component or blocking on a FIFO, up to max bytes.
func readRegular(dir, rel string, max int64) ([]byte, error) {
	f, fi, err := (&workspace.Workspace{Dir: dir}).OpenRegular(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > max {
		return nil, fmt.Errorf("the file is larger than %s", sandbox.FormatSize(max))
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(data)) > max {
		err = fmt.Errorf("the file is larger than %s", sandbox.FormatSize(max))
	}
	return data, err
}

// validPath checks a relative, slash-separated path as the HTTP API does:
// no absolute path, no empty, "." or ".." segment, no control characters
// or backslashes, valid UTF-8, bounded length.
func validPath(p string) error {
	bad := p == "" || len(p) > 1024 || !utf8.ValidString(p) || strings.HasPrefix(p, "/") || strings.ContainsRune(p, '\\')
	for _, r := range p {
		bad = bad || unicode.IsControl(r)
	}
	for _, seg := range strings.Split(p, "/") {
		bad = bad || seg == "" || seg == "." || seg == ".." || len(seg) > 255
	}
	if bad {
		return argError("invalid path %q: a relative path inside the workspace, without '..'", p)
	}
	return nil
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
