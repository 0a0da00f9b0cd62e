package verify_test

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/clasp-dev/clasp/internal/verify"
)

// blockerOp is a reopen or resolve of the blocker of issue by run runA,
// answered OK.
func blockerOp(kind string, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: 1, Call: call, Return: ret,
		Input:  verify.Input{Kind: kind, Issue: issue, Run: runA, Agent: agA},
		Output: verify.Output{OK: true}}
}

// blockedCheckout is runA's checkout of issue at epoch 1 answered with the
// issue not dependency-ready.
func blockedCheckout(call, ret int64) porcupine.Operation {
	op := checkout(0, runA, agA, call, ret, 1)
	l := *op.Output.(verify.Output).Issue
	l.Blocked = true
	out := op.Output.(verify.Output)
	out.Issue = &l
	op.Output = out
	return op
}

// TestCheckDependencyReadiness: the model of the readiness rules. A
// checkout after its blocker was reopened must be refused
// blocked_by_unresolved (a success is a violation), a refusal while the
// blocker is done is a violation too, and a checkout concurrent with the
// reopen may go either way.
func TestCheckDependencyReadiness(t *testing.T) {
	refused := porcupine.Operation{ClientId: 0, Call: 30, Return: 40,
		Input:  verify.Input{Kind: verify.OpCheckout, Issue: issue, Run: runA, Agent: agA},
		Output: verify.Output{Status: 422, Code: "blocked_by_unresolved"}}
	for _, tc := range []struct {
		name string
		h    []porcupine.Operation
		ok   bool
	}{
		{"checkout after a reopen succeeds", []porcupine.Operation{blockerOp(verify.OpReopen, 10, 20), checkout(0, runA, agA, 30, 40, 1)}, false},
		{"checkout after a reopen is refused", []porcupine.Operation{blockerOp(verify.OpReopen, 10, 20), refused}, true},
		{"refused while the blocker is done", []porcupine.Operation{refused}, false},
		{"refused, then resolved, then taken", []porcupine.Operation{blockerOp(verify.OpReopen, 1, 2), refused,
			blockerOp(verify.OpResolve, 50, 60), checkout(0, runA, agA, 70, 80, 1)}, true},
		{"concurrent with the reopen: taken", []porcupine.Operation{blockerOp(verify.OpReopen, 10, 40), checkout(0, runA, agA, 20, 30, 1)}, true},
		{"concurrent with the reopen: refused", []porcupine.Operation{blockerOp(verify.OpReopen, 10, 40), {ClientId: 0, Call: 20, Return: 30,
			Input:  verify.Input{Kind: verify.OpCheckout, Issue: issue, Run: runA, Agent: agA},
			Output: verify.Output{Status: 422, Code: "blocked_by_unresolved"}}}, true},
		{"read shows the readiness", []porcupine.Operation{blockerOp(verify.OpReopen, 10, 20), {ClientId: 2, Call: 30, Return: 40,
			Input:  verify.Input{Kind: verify.OpRead, Issue: issue},
			Output: verify.Output{OK: true, Issue: &verify.Lock{Status: "todo", L7: true, Blocked: true}}}}, true},
		{"read misses the reopen", []porcupine.Operation{blockerOp(verify.OpReopen, 10, 20), {ClientId: 2, Call: 30, Return: 40,
			Input:  verify.Input{Kind: verify.OpRead, Issue: issue},
			Output: verify.Output{OK: true, Issue: &verify.Lock{Status: "todo", L7: true}}}}, false},
		{"an in_progress issue keeps its holder's re-checkout", []porcupine.Operation{checkout(0, runA, agA, 1, 2, 1),
			blockerOp(verify.OpReopen, 10, 20), blockedCheckout(30, 40)}, true},
		{"a re-checkout that hides the reopen", []porcupine.Operation{checkout(0, runA, agA, 1, 2, 1),
			blockerOp(verify.OpReopen, 10, 20), checkout(0, runA, agA, 30, 40, 1)}, false},
	} {
		res, _, err := verify.Check(tc.h, t.TempDir(), time.Minute)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if (res == porcupine.Ok) != tc.ok {
			t.Errorf("%s: %s, want ok=%v", tc.name, res, tc.ok)
		}
	}
}
