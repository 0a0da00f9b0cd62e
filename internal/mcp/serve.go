package mcp

import (
	"context"
	"errors"
	"io"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clasp-dev/clasp"
)

// Serve runs an MCP server for sess over the newline-delimited JSON-RPC
// stream in/out (stdin and stdout of `clasp mcp`) until in ends or ctx
// ends, then closes the session: its own run is finished succeeded when in
// ended, cancelled when ctx ended (SIGTERM, SIGINT). It returns nil in both
// cases, and the transport's error otherwise.
func Serve(ctx context.Context, sess *Session, in io.ReadCloser, out io.WriteCloser) error {
	srv := NewServer(sess)
	err := srv.Run(ctx, &sdk.IOTransport{Reader: in, Writer: out})
	status := clasp.RunSucceeded
	if ctx.Err() != nil {
		status = clasp.RunCancelled
	}
	cerr := sess.Close(status)
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
		return err
	}
	return cerr
}
