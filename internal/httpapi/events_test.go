package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
)

// sseEvent is one parsed Server-Sent Event.
type sseEvent struct {
	id     int64
	action string
	data   clasp.Activity
}

// openStream opens GET path as token (board when "") with extra headers and
// returns a channel of parsed events, closed when the stream ends.
func (b *bundle) openStream(ctx context.Context, path, token string, headers map[string]string) (*http.Response, <-chan sseEvent) {
	b.t.Helper()
	hr, err := http.NewRequestWithContext(ctx, "GET", b.ts.URL+path, nil)
	if err != nil {
		b.t.Fatalf("new request: %v", err)
	}
	if token == "" {
		token = b.board
	}
	hr.Header.Set("Authorization", "Bearer "+token)
	for k, v := range headers {
		hr.Header.Set(k, v)
	}
	res, err := b.hc.Do(hr)
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	ch := make(chan sseEvent, 100)
	go func() {
		defer close(ch)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.id, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "event: "):
				ev.action = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data)
			case line == "" && ev.id != 0:
				ch <- ev
				ev = sseEvent{}
			}
		}
	}()
	return res, ch
}

// next waits for the next event whose action is one of want (others are
// skipped), failing the test after 10 s.
func nextEvent(t *testing.T, ch <-chan sseEvent, want ...string) sseEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended while waiting for %v", want)
			}
			for _, w := range want {
				if ev.action == w {
					return ev
				}
			}
		case <-timeout:
			t.Fatalf("no %v event within 10 s", want)
		}
	}
}

// TestEventsStream: GET /api/companies/{id}/events streams the company's
// activity as SSE: a checkout made after the stream opened
// arrives with the activity id as the event id; Last-Event-ID resumes after
// that id; another company's agent gets 403; shutdown ends the stream.
func TestEventsStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("EV")
	other := b.company("EO")
	_, ko := b.agent(other.ID, "outsider")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	res, ch := b.openStream(ctx, "/api/companies/"+w.c.ID+"/events", w.ka, nil)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: status %d, Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	b.checkout(i1.ID, w.ka, w.ra1.ID, w.a.ID)
	ev := nextEvent(t, ch, clasp.ActionIssueCheckedOut)
	if ev.data.EntityID != i1.ID || ev.data.ID != ev.id || deref(ev.data.RunID) != w.ra1.ID {
		t.Errorf("checked_out event: id %d, %+v; want entity %s, run %s", ev.id, ev.data, i1.ID, w.ra1.ID)
	}
	b.must(http.StatusOK, "POST", "/api/issues/"+i1.ID+"/release", req{token: w.ka, run: w.ra1.ID}, nil)
	rel := nextEvent(t, ch, clasp.ActionIssueReleased)

	// Resume after the checkout: the release comes again, the checkout not.
	_, ch2 := b.openStream(ctx, "/api/companies/"+w.c.ID+"/events", "", map[string]string{"Last-Event-ID": strconv.FormatInt(ev.id, 10)})
	got := nextEvent(t, ch2, clasp.ActionIssueReleased, clasp.ActionIssueCheckedOut)
	if got.id != rel.id || got.action != clasp.ActionIssueReleased {
		t.Errorf("resumed stream's first lock event: %s #%d, want %s #%d", got.action, got.id, clasp.ActionIssueReleased, rel.id)
	}

	// Tenancy and bad input.
	wantErr(t, b.do("GET", "/api/companies/"+w.c.ID+"/events", req{token: ko}), 403, clasp.CodeForbidden, "")
	wantErr(t, b.do("GET", "/api/companies/"+w.c.ID+"/events", req{headers: map[string]string{"Last-Event-ID": "x"}}), 400, clasp.CodeInvalidRequest, "Last-Event-ID")

	// Shutdown ends open streams.
	b.srv.BeginShutdown()
	for range ch {
	}
}

// TestEventsHead: HEAD on the event stream answers the stream's headers
// with no body and ends at once, so it holds no stream slot: more HEADs
// than the per-agent cap of open streams are all answered 200.
func TestEventsHead(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) { o.limits = Limits{StreamsPerAgent: 2} })
	w := b.world("EH")
	for i := range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		hr, err := http.NewRequestWithContext(ctx, "HEAD", b.ts.URL+"/api/companies/"+w.c.ID+"/events", nil)
		if err != nil {
			t.Fatalf("new request: %v", err)
		}
		hr.Header.Set("Authorization", "Bearer "+w.ka)
		res, err := b.hc.Do(hr)
		if err != nil {
			t.Fatalf("HEAD %d: %v (the stream did not end by itself)", i, err)
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		cancel()
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") || n != 0 {
			t.Fatalf("HEAD %d: status %d, Content-Type %q, %d body bytes; want 200, text/event-stream, none",
				i, res.StatusCode, res.Header.Get("Content-Type"), n)
		}
	}
}
