package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clasp-dev/clasp"
)

// maxLine caps one line of the stdio stream (one JSON-RPC message or
// batch): 4 MiB. A longer line is answered -32700 and skipped.
const maxLine = 4 << 20

// Serve runs an MCP server for sess over the newline-delimited JSON-RPC
// stream in/out (stdin and stdout of `clasp mcp`) until in ends or ctx
// ends, then closes the session: its own run is finished succeeded when in
// ended, cancelled when ctx ended (SIGTERM, SIGINT), failed when the
// transport broke (out could not be written). A line that is not a
// JSON-RPC message is answered on out with a JSON-RPC error (-32700 parse
// error for text that is not JSON or is longer than 4 MiB, -32600 invalid
// request for JSON that is not one message, a batch included, with the
// line's id when it has one) and skipped: one bad line never ends the session. It returns nil
// when in or ctx ended, and the transport's error otherwise.
func Serve(ctx context.Context, sess *Session, in io.ReadCloser, out io.WriteCloser) error {
	srv := NewServer(sess)
	defer context.AfterFunc(ctx, sess.endCalls)() // a signal ends the tool calls in progress too
	w := &lockedWriter{w: out}
	calls := newPendingCalls()
	pr, pw := io.Pipe()
	go func() {
		err := filterLines(in, pw, w, calls)
		if err == nil {
			// The SDK cancels the calls in progress, and writes no answer,
			// once its input ends: hold the end back until every request
			// passed on has been answered (or a signal ends the calls).
			calls.wait(ctx, drainTimeout)
		}
		_ = pw.CloseWithError(err)
	}()
	err := srv.Run(ctx, &sdk.IOTransport{Reader: readCloser{pr, in}, Writer: &answerWriter{w: w, calls: calls}})
	status := clasp.RunSucceeded
	broken := err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled)
	switch {
	case ctx.Err() != nil:
		status = clasp.RunCancelled
	case broken:
		status = clasp.RunFailed
	}
	cerr := sess.Close(status)
	if broken {
		return err
	}
	return cerr
}

// drainTimeout bounds how long Serve waits, once stdin has ended, for the
// answers to the requests still in progress (a tool call's requests to the
// server have their own, shorter, timeouts).
const drainTimeout = 2 * time.Minute

// pendingCalls counts the requests passed on to the SDK (by id) that it has
// not answered yet.
type pendingCalls struct {
	mu      sync.Mutex
	ids     map[string]int
	n       int
	changed chan struct{} // a token after each answer
}

func newPendingCalls() *pendingCalls {
	return &pendingCalls{ids: map[string]int{}, changed: make(chan struct{}, 1)}
}

// idKey is the id of a JSON-RPC message as a map key ("" for none): a
// number and a string of the same digits differ.
func idKey(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return ""
	}
	switch v := v.(type) {
	case string:
		return "s" + v
	case float64:
		return "n" + strconv.FormatFloat(v, 'g', -1, 64)
	}
	return ""
}

// request records msg if it is a request (a method and an id).
func (p *pendingCalls) request(msg []byte) {
	var m struct {
		Method *string         `json:"method"`
		ID     json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &m) != nil || m.Method == nil {
		return
	}
	if k := idKey(m.ID); k != "" {
		p.mu.Lock()
		p.ids[k]++
		p.n++
		p.mu.Unlock()
	}
}

// answer retires the request msg answers, if msg is a response to one.
func (p *pendingCalls) answer(msg []byte) {
	var m struct {
		Method *string         `json:"method"`
		ID     json.RawMessage `json:"id"`
	}
	if json.Unmarshal(bytes.TrimSpace(msg), &m) != nil || m.Method != nil {
		return
	}
	k := idKey(m.ID)
	p.mu.Lock()
	if p.ids[k] > 0 {
		if p.ids[k]--; p.ids[k] == 0 {
			delete(p.ids, k)
		}
		p.n--
	}
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// wait returns once no request is unanswered, ctx has ended, or max has
// passed.
func (p *pendingCalls) wait(ctx context.Context, max time.Duration) {
	t := time.NewTimer(max)
	defer t.Stop()
	for {
		p.mu.Lock()
		n := p.n
		p.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-p.changed:
		case <-ctx.Done():
			return
		case <-t.C:
			return
		}
	}
}

// answerWriter is the SDK's writer: each message it writes (one per Write)
// that answers a pending request retires it.
type answerWriter struct {
	w     *lockedWriter
	calls *pendingCalls
}

func (a *answerWriter) Write(p []byte) (int, error) {
	n, err := a.w.Write(p)
	a.calls.answer(p)
	return n, err
}

func (a *answerWriter) Close() error { return a.w.Close() }

// filterLines copies the JSON-RPC messages of in, one per line, to pw
// (recording each request in calls), and answers every other non-blank line
// on out with a JSON-RPC error. It returns nil at the end of in, or the
// first error reading in or writing.
func filterLines(in io.Reader, pw io.Writer, out io.Writer, calls *pendingCalls) error {
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		line, tooLong, err := readLine(br)
		if len(bytes.TrimSpace(line)) > 0 || tooLong {
			if reply := lineError(line, tooLong); reply != nil {
				if _, werr := out.Write(reply); werr != nil {
					return werr
				}
			} else {
				calls.request(line)
				if _, werr := pw.Write(append(line, '\n')); werr != nil {
					return werr
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine returns the next line of br without its newline; tooLong when
// it ran past maxLine (the rest of it is read and dropped). err is io.EOF
// after the last line.
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			line = append(line, chunk...)
			if len(line) > maxLine {
				tooLong, line = true, nil
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), tooLong, err
	}
}

// lineError returns the JSON-RPC error reply (with its newline) for a line
// that is not one message (a batch included), or nil for a message.
func lineError(line []byte, tooLong bool) []byte {
	line = bytes.TrimSpace(line)
	var code int64
	var msg string
	switch {
	case tooLong:
		code, msg = jsonrpc.CodeParseError, fmt.Sprintf("Parse error: a message is at most %d bytes on one line.", maxLine)
	case !json.Valid(line):
		code, msg = jsonrpc.CodeParseError, "Parse error: the line is not JSON; send one JSON-RPC message per line."
	case line[0] == '[':
		// MCP since 2025-06-18 has no JSON-RPC batches, and the SDK ends
		// the whole session on one: answer it instead.
		code, msg = jsonrpc.CodeInvalidRequest, "Invalid request: JSON-RPC batches are not supported (MCP 2025-06-18 removed them); send one message per line."
	default:
		if isMessage(line) {
			return nil
		}
		code, msg = jsonrpc.CodeInvalidRequest, `Invalid request: a JSON-RPC 2.0 message has "jsonrpc":"2.0" and a "method" (request, notification) or a "result" or "error" (response).`
	}
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	id := json.RawMessage("null")
	if code == jsonrpc.CodeInvalidRequest && json.Unmarshal(line, &probe) == nil && validID(probe.ID) {
		id = probe.ID
	}
	reply, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	return append(reply, '\n')
}

// isMessage reports whether line is one JSON-RPC 2.0 message: an object
// with "jsonrpc":"2.0" and a "method" (a request or notification), or an
// "id" and a "result" or "error" (a response), that the SDK decodes.
func isMessage(line []byte) bool {
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  *string         `json:"method"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(line, &m) != nil || m.JSONRPC != "2.0" {
		return false
	}
	if m.Method == nil && (len(m.ID) == 0 || (len(m.Result) == 0 && len(m.Error) == 0)) {
		return false
	}
	_, err := jsonrpc.DecodeMessage(line)
	return err == nil
}

// validID reports whether raw is a JSON-RPC id: a string or a number.
func validID(raw json.RawMessage) bool {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

// lockedWriter serializes whole writes to w: the SDK writes each message
// in one Write, and filterLines writes its error replies the same way.
type lockedWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return l.w.Close() }

// readCloser reads the filtered stream; closing it (the transport does at
// its end) closes the stream and the real input, which ends filterLines.
type readCloser struct {
	*io.PipeReader
	in io.Closer
}

func (r readCloser) Close() error {
	_ = r.PipeReader.Close() // never fails
	return r.in.Close()
}
