package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codeagent/codeagent/app"
)

// argError is an invalid argument: a tool error the model can correct.
func argError(format string, a ...any) error { return app.Errorf(app.Invalid, format, a...) }

// toolError is the one place where an error becomes an MCP tool error, a
// result with isError that the client's model reads and may act on. Its
// text is the error's public message (app.Describe: no host paths), after
// a prefix saying what the class asks of the caller:
//
//	invalid, forbidden:  "invalid arguments: ..."  (fix the call)
//	busy, unavailable:   "... (try again in N s)"  (call again later)
//	sandbox_setup:       "the sandbox could not run the program: ..."
//	not_found, conflict, disk_full, provider, timeout: the message
//	internal:            the error without host paths
//
// A JSON-RPC error (a protocol failure) stays one.
func toolError(err error) error {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		return err
	}
	d := app.Describe(err)
	msg := d.Message
	switch d.Class {
	case app.Invalid, app.Forbidden:
		if !strings.HasPrefix(msg, "invalid arguments") {
			msg = "invalid arguments: " + msg
		}
	case app.Busy, app.Unavailable:
		if d.RetryAfter > 0 {
			msg += fmt.Sprintf(" (try again in %d s)", int(math.Ceil(d.RetryAfter.Seconds())))
		}
	case app.Internal:
		if d.Code == "internal" {
			msg = app.PublicMessage(err.Error())
		}
	}
	return errors.New(msg)
}

// mapErrors gives h's errors their one mapping, toolError.
func mapErrors[In, Out any](h mcp.ToolHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		res, out, err := h(ctx, req, in)
		if err != nil {
			return res, out, toolError(err)
		}
		return res, out, nil
	}
}
