package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/clasp-dev/clasp/internal/httpapi"
)

// wire is one bench client's own keep-alive HTTP/1.1 connection to the
// server, for the workloads whose load clients send a request and wait for
// its answer in a loop (cycle). It writes each request itself, in one
// write from the client's goroutine, and reads the answer with net/http's
// own parser (http.ReadResponse), so the load clients spend less of the
// process's CPU than net/http's Transport does (a request object, a
// connection pool look-up and two goroutine hand-offs per request) while
// the server sees the same requests as from net/http's client. A request
// on a reused connection that the server had closed (nothing of an answer
// read) is sent again once on a new connection, as net/http's Transport
// does. A base URL other than http:// goes through api.do.
type wire struct {
	a    *api
	ctx  context.Context
	host string // host:port to dial and to send as Host
	c    net.Conn
	br   *bufio.Reader
	req  []byte // the request being written, reused
	body []byte // an answer's body when kept, reused
	stop func() bool
}

// newWire returns a's connection for one bench client; requests made
// with it end when ctx is done.
func newWire(ctx context.Context, a *api) *wire {
	w := &wire{a: a, ctx: ctx}
	if h, ok := strings.CutPrefix(a.base, "http://"); ok && !strings.Contains(h, "/") {
		w.host = h
	}
	return w
}

// close ends the connection.
func (w *wire) close() {
	if w.c != nil {
		w.stop()
		_ = w.c.Close()
		w.c, w.br = nil, nil
	}
}

// do sends one request as api.do does and answers the same: the status
// and, when keep is true or the status is not 2xx, the body (valid until
// the next call).
func (w *wire) do(method, path, token, runID string, body []byte, keep bool) (int, []byte, error) {
	if w.host == "" {
		st, b, err := w.a.do(w.ctx, method, path, token, runID, body, keep)
		return st, b, err
	}
	w.req = appendRequest(w.req[:0], method, path, w.host, token, runID, body)
	reused := w.c != nil
	st, b, err := w.roundTrip(keep)
	if err != nil && reused && errors.Is(err, errClosedIdle) && w.ctx.Err() == nil {
		st, b, err = w.roundTrip(keep)
	}
	if errors.Is(err, errClosedIdle) {
		err = io.ErrUnexpectedEOF
	}
	return st, b, err
}

// errClosedIdle is a request's failure on a connection the server had
// closed before any of the answer arrived.
var errClosedIdle = errors.New("bench: the server closed the connection")

func (w *wire) roundTrip(keep bool) (int, []byte, error) {
	if w.c == nil {
		var d net.Dialer
		c, err := d.DialContext(w.ctx, "tcp", w.host)
		if err != nil {
			if w.ctx.Err() != nil {
				return 0, nil, w.ctx.Err()
			}
			return 0, nil, err
		}
		w.c, w.br = c, bufio.NewReaderSize(c, 4096)
		w.stop = context.AfterFunc(w.ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	}
	if _, err := w.c.Write(w.req); err != nil {
		w.close()
		if w.ctx.Err() != nil {
			return 0, nil, w.ctx.Err()
		}
		return 0, nil, closedIdle(err)
	}
	if _, err := w.br.Peek(1); err != nil { // nothing of an answer
		w.close()
		if w.ctx.Err() != nil {
			return 0, nil, w.ctx.Err()
		}
		return 0, nil, closedIdle(err)
	}
	res, err := http.ReadResponse(w.br, nil)
	if err != nil {
		w.close()
		if w.ctx.Err() != nil {
			return 0, nil, w.ctx.Err()
		}
		return 0, nil, err
	}
	var b []byte
	if keep || res.StatusCode/100 != 2 {
		buf := bytes.NewBuffer(w.body[:0])
		_, err = buf.ReadFrom(res.Body)
		w.body = buf.Bytes()
		b = w.body
	} else {
		_, err = io.Copy(io.Discard, res.Body)
	}
	_ = res.Body.Close()
	if err != nil || res.Close {
		w.close()
	}
	if err != nil && w.ctx.Err() != nil {
		err = w.ctx.Err()
	}
	return res.StatusCode, b, err
}

// closedIdle marks err as errClosedIdle when it says the peer had closed
// the connection (end of stream, reset, broken pipe).
func closedIdle(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return errClosedIdle
	}
	return err
}

// appendRequest appends to b the request net/http's client sends for
// api.do (the same request line and headers, the body's length).
func appendRequest(b []byte, method, path, host, token, runID string, body []byte) []byte {
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nUser-Agent: Go-http-client/1.1\r\n"...)
	if body != nil || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	if token != "" {
		b = append(b, "Authorization: Bearer "...)
		b = append(b, token...)
		b = append(b, "\r\n"...)
	}
	if body != nil {
		b = append(b, "Content-Type: application/json\r\n"...)
	}
	if runID != "" {
		b = append(b, httpapi.RunIDHeader...)
		b = append(b, ": "...)
		b = append(b, runID...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, body...)
}
