package verify_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/clasp-dev/clasp/internal/verify"
)

// hardHistory is one issue's history porcupine cannot decide quickly: n
// checkouts and releases of different runs whose outcomes are unknown and
// never bounded, then a read no linearization explains (epoch 10n), so the
// search has to try every subset and order of them.
func hardHistory(n int) []porcupine.Operation {
	var h []porcupine.Operation
	for i := range n {
		run := fmt.Sprintf("00000000-0000-0000-0000-%012d", i+1)
		agent := fmt.Sprintf("00000000-0000-0000-0001-%012d", i%3)
		kind := verify.OpCheckout
		if i%2 == 1 {
			kind = verify.OpRelease
		}
		h = append(h, porcupine.Operation{ClientId: i, Call: int64(i), Return: math.MaxInt64,
			Input:  verify.Input{Kind: kind, Issue: issue, Run: run, Agent: agent},
			Output: verify.Output{Unknown: true}})
	}
	h = append(h, porcupine.Operation{ClientId: n, Call: int64(n + 10), Return: int64(n + 20),
		Input:  verify.Input{Kind: verify.OpRead, Issue: issue},
		Output: verify.Output{OK: true, Issue: &verify.Lock{Status: "in_progress", Epoch: int64(10 * n), L7: true}}})
	return h
}

// TestCheckStopsWithContext: the check honours its context (SIGTERM ends
// clasp verify's): a cancelled check returns the context's error with the
// partitions it did not decide counted undecided, instead of running on
// for its whole timeout.
func TestCheckStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	res, parts, _, err := verify.CheckPartitionsContext(ctx, hardHistory(40), t.TempDir(), time.Hour)
	if !errors.Is(err, context.Canceled) || res != porcupine.Unknown {
		t.Fatalf("result %v, err %v; want Unknown and context.Canceled", res, err)
	}
	if len(parts) != 1 || parts[0].Result != "unknown" {
		t.Fatalf("partitions %+v, want the one undecided", parts)
	}
}

// TestCheckTimeoutBoundsTheWholeCheck: the timeout bounds the check of all
// partitions together, not each one: partitions still queued when it runs
// out are undecided, not started late.
func TestCheckTimeoutBoundsTheWholeCheck(t *testing.T) {
	var h []porcupine.Operation
	for p := range 8 {
		for _, o := range hardHistory(40) {
			in := o.Input.(verify.Input)
			in.Issue = fmt.Sprintf("issue-%d", p)
			in.Run = fmt.Sprintf("%s-%d", in.Run, p)
			o.Input = in
			h = append(h, o)
		}
	}
	res, parts, _, err := verify.CheckPartitionsContext(context.Background(), h, t.TempDir(), 300*time.Millisecond)
	if err != nil || res != porcupine.Unknown {
		t.Fatalf("result %v, err %v; want Unknown", res, err)
	}
	for _, p := range parts {
		if p.Result != "unknown" {
			t.Errorf("partition %s: %s, want unknown", p.Issue, p.Result)
		}
	}
}
