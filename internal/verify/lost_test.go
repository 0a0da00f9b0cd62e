package verify_test

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/clasp-dev/clasp/internal/verify"
)

// TestCheckAcceptsLostHolderDisplaced: run A checks out, its lease runs
// out (no operation records it), run A2 of the same agent takes the issue over with the next epoch, and A's later calls are
// refused run_not_live: linearizable (L1/L3 adoption of a lost holder).
func TestCheckAcceptsLostHolderDisplaced(t *testing.T) {
	runA2 := "00000000-0000-0000-0000-0000000000a2"
	h := []porcupine.Operation{
		checkout(0, runA, agA, 10, 20, 1),
		checkout(1, runA2, agA, 30, 40, 2),
		{ClientId: 0, Call: 50, Return: 60,
			Input:  verify.Input{Kind: verify.OpHeartbeat, Run: runA, Agent: agA},
			Output: verify.Output{Status: 409, Code: "run_not_live"}},
		{ClientId: 0, Call: 61, Return: 70,
			Input:  verify.Input{Kind: verify.OpRelease, Issue: issue, Run: runA, Agent: agA},
			Output: verify.Output{Status: 409, Code: "run_not_live"}},
	}
	res, _, err := verify.Check(h, t.TempDir(), time.Minute)
	if err != nil || res != porcupine.Ok {
		t.Fatalf("result %s, %v; want Ok", res, err)
	}
}

// TestCheckCatchesLateWriteOfDisplacedRun: once run B displaced run A
// (A's lease ran out), a later success of A (here a release, the
// in-flight write of a paused replica landing after the takeover) must be
// caught, and so must A succeeding a heartbeat after B took over.
func TestCheckCatchesLateWriteOfDisplacedRun(t *testing.T) {
	runA2 := "00000000-0000-0000-0000-0000000000a2"
	late := []porcupine.Operation{
		{ClientId: 0, Call: 50, Return: 60,
			Input:  verify.Input{Kind: verify.OpRelease, Issue: issue, Run: runA, Agent: agA},
			Output: verify.Output{OK: true, Issue: &verify.Lock{Status: "todo", Assignee: agA, Epoch: 2, L7: true}}},
		{ClientId: 0, Call: 50, Return: 60,
			Input:  verify.Input{Kind: verify.OpHeartbeat, Run: runA, Agent: agA},
			Output: verify.Output{OK: true}},
		checkout(0, runA, agA, 50, 60, 3),
	}
	for i, op := range late {
		h := []porcupine.Operation{checkout(0, runA, agA, 10, 20, 1), checkout(1, runA2, agA, 30, 40, 2), op}
		res, _, err := verify.Check(h, t.TempDir(), time.Minute)
		if err != nil || res != porcupine.Illegal {
			t.Errorf("late op %d: result %s, %v; want Illegal", i, res, err)
		}
	}
}

// TestCheckAcceptsSweptLock: a lost holder's lock is cleared by the
// sweeper (status, assignee and epoch kept) and a read sees it so.
func TestCheckAcceptsSweptLock(t *testing.T) {
	h := []porcupine.Operation{
		checkout(0, runA, agA, 10, 20, 1),
		{ClientId: 1, Call: 30, Return: 40,
			Input:  verify.Input{Kind: verify.OpRead, Issue: issue},
			Output: verify.Output{OK: true, Issue: &verify.Lock{Status: "in_progress", Assignee: agA, Epoch: 1, L7: true}}},
	}
	res, _, err := verify.Check(h, t.TempDir(), time.Minute)
	if err != nil || res != porcupine.Ok {
		t.Fatalf("result %s, %v; want Ok", res, err)
	}
}
