package mcp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBinaryAnswersEveryRequestBeforeEOF pipes initialize, the initialized
// notification and a tools/call into the real `clasp mcp` and closes stdin
// at once: the process answers both requests (the tool call that was still
// in progress when stdin ended included) before it exits.
func TestBinaryAnswersEveryRequestBeforeEOF(t *testing.T) {
	w := newWorld(t, "", 30*time.Second, 1)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"claim_next_issue","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"session_status","arguments":{}}}`,
	}, "\n") + "\n"
	cmd := exec.Command(claspBinary(t), "mcp")
	cmd.Env = append(os.Environ(), "CLASP_URL="+w.url, "CLASP_API_KEY="+w.keys[0], "CLASP_RUN_ID=", "CLASP_RUN_TOKEN=", "CLASP_API_KEY_FILE=")
	cmd.Stdin = strings.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.Output(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("clasp mcp did not exit within 60s after stdin ended\n%s", stderr.String())
	}
	if err != nil {
		t.Fatalf("clasp mcp: %v\n%s", err, stderr.String())
	}
	ids := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &m) == nil && len(m.ID) > 0 && (len(m.Result) > 0 || len(m.Error) > 0) {
			ids[string(m.ID)] = true
		}
	}
	for _, id := range []string{"1", "2", "3"} {
		if !ids[id] {
			t.Errorf("no answer to request %s; stdout:\n%s\nstderr:\n%s", id, out, stderr.String())
		}
	}
}
