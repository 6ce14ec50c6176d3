package mcpserver

import (
	"context"
	"encoding/base64"
	"github.com/codeagent/codeagent/kernel"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/app"
	"github.com/codeagent/codeagent/sandbox"
	"github.com/codeagent/codeagent/workspace"
)

// execute_code with keep_state runs the code as a cell of the MCP
// session's kernel: one per MCP session (never shared with another session
// or API key), ended with the session.

// kernelKey names an MCP session's kernel. The label is unique to the MCP
// session (and names its API key on the HTTP server).
func kernelKey(st *sessionState) kernel.Key { return kernel.Key{Owner: "mcp", Session: st.label} }

// checkCell refuses keep_state where this server does not offer it, and a
// cell a kernel cannot take (app.CellRequest.Validate).
func (s *Server) checkCell(in ExecuteInput) error {
	if s.deps.Kernels == nil {
		return argError("keep_state is not offered by this server")
	}
	return app.CellRequest{Language: in.Language, Code: in.Code, Stdin: in.Stdin, Limits: in.Limits.asked(),
		AllowHosts: in.AllowHosts, Dependencies: in.Dependencies}.Validate()
}

func (s *Server) executeCell(ctx context.Context, st *sessionState, ws *workspace.Workspace, in ExecuteInput, limits sandbox.Limits,
	before workspace.Snapshot, x *app.Exec) (*mcp.CallToolResult, ExecuteOutput, error) {
	var out ExecuteOutput
	var res kernel.Result
	exec := func() (sandbox.Result, error) {
		var err error
		res, err = s.deps.Kernels.Exec(ctx, "mcp", true, kernelKey(st), ws.Dir, kernel.Cell{Code: in.Code, Stdin: in.Stdin, Timeout: limits.WallTime})
		return res.Result, err
	}
	if _, err := x.Cell(ctx, in.Code, limits.WallTime, exec); err != nil {
		return nil, out, err
	}
	j := res.JSON()
	out.ResultJSON = j.ResultJSON
	out.ExecutionCount, out.KernelDied, out.KernelRestarted, out.RestartReason = j.ExecutionCount, j.KernelDied, j.KernelRestarted, j.RestartReason
	var images []mcp.Content
	var total int64
	for _, d := range res.Display {
		shown := kernel.Display{Kind: d.Kind, File: d.File, Data: map[string]string{}}
		for mime, v := range d.Data {
			if mime != "image/png" {
				shown.Data[mime] = v
				continue
			}
			png, err := base64.StdEncoding.DecodeString(v)
			if err != nil || int64(len(png)) > s.cfg.MaxImage || total+int64(len(png)) > s.cfg.MaxImageTotal || len(images) >= s.cfg.MaxImages {
				continue
			}
			total += int64(len(png))
			images = append(images, &mcp.ImageContent{Data: png, MIMEType: "image/png"})
			shown.Data[mime] = "(returned as image content)"
		}
		out.Display = append(out.Display, shown)
	}
	out.Images = res.Images
	if err := collect(x, ws, before, &out, res.WallTime); err != nil {
		return nil, out, err
	}
	result, err := resultWith(out, images)
	if err != nil {
		return nil, out, err
	}
	result.IsError = res.Status == sandbox.StatusSandboxError
	return result, out, nil
}
