package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/clasp-dev/clasp/internal/mcp"
)

// TestStdioBadLines: a line that is not a JSON-RPC message is answered with
// a JSON-RPC error (-32700 for text that is not JSON, -32600 with the line's
// id for JSON that is not a message) and the session goes on: the next
// request is answered, and stdin's end still ends Serve cleanly.
func TestStdioBadLines(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	sess := mcp.NewSession(mcp.Config{}, mcp.Options{}) // not configured: no network
	done := make(chan error, 1)
	go func() { done <- mcp.Serve(context.Background(), sess, inR, outW) }()
	replies := bufio.NewScanner(outR)
	replies.Buffer(nil, 1<<20)
	next := func() map[string]any {
		t.Helper()
		got := make(chan map[string]any, 1)
		go func() {
			var m map[string]any
			if replies.Scan() {
				_ = json.Unmarshal(replies.Bytes(), &m)
			}
			got <- m
		}()
		select {
		case m := <-got:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no reply within 10 s")
			return nil
		}
	}
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	errCode := func(m map[string]any) (float64, any) {
		e, _ := m["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return c, m["id"]
	}

	send("this is not json")
	if code, id := errCode(next()); code != -32700 || id != nil {
		t.Fatalf("text line: code %v id %v, want -32700 and id null", code, id)
	}
	send(`{"jsonrpc":"2.0","id":7,"params":{}}`)
	if code, id := errCode(next()); code != -32600 || id != float64(7) {
		t.Fatalf("message without a method: code %v id %v, want -32600 and id 7", code, id)
	}
	send(strings.Repeat("x", 5<<20))
	if code, _ := errCode(next()); code != -32700 {
		t.Fatalf("a 5 MiB line: code %v, want -32700", code)
	}
	for _, batch := range []string{`[]`, `[1,2]`, `[{"jsonrpc":"2.0","id":8,"method":"ping"}]`} {
		send(batch)
		if code, id := errCode(next()); code != -32600 || id != nil {
			t.Fatalf("batch %s: code %v id %v, want -32600 and id null", batch, code, id)
		}
	}
	send("   ") // blank lines are skipped without a reply
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	init := next()
	if init["id"] != float64(1) || init["result"] == nil {
		t.Fatalf("initialize after the bad lines: %v", init)
	}
	_ = inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after stdin ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after stdin ended")
	}
}
