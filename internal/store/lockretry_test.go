package store

import (
	"context"
	"errors"
	"testing"
)

// RunLockRule runs a lock rule's statement again while it lost the row
// (LockRowChanged) or its run (LockRunEnded), and no more than LockTries
// times; a write, a refusal or an error ends it at once.
func TestRunLockRule(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, tc := range []struct {
		name      string
		outcomes  []LockOutcome // then repeats the last
		err       error
		wantTries int
		wantErr   bool
	}{
		{"written", []LockOutcome{LockWritten}, nil, 1, false},
		{"refused", []LockOutcome{LockRefused}, nil, 1, false},
		{"row changed, then written", []LockOutcome{LockRowChanged, LockRowChanged, LockWritten}, nil, 3, false},
		{"run ended, then refused", []LockOutcome{LockRunEnded, LockRefused}, nil, 2, false},
		{"error", []LockOutcome{LockRowChanged}, boom, 1, true},
		{"always lost", []LockOutcome{LockRowChanged, LockRunEnded}, nil, LockTries, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			got, err := RunLockRule(context.Background(), "check out issue", "I1", func() (int, LockOutcome, error) {
				o := tc.outcomes[min(tries, len(tc.outcomes)-1)]
				tries++
				return tries, o, tc.err
			})
			if tries != tc.wantTries || (err != nil) != tc.wantErr {
				t.Fatalf("got %d tries, error %v; want %d tries, error %v", tries, err, tc.wantTries, tc.wantErr)
			}
			if err == nil && got != tries {
				t.Errorf("got answer %d, want the last try's (%d)", got, tries)
			}
		})
	}
}

// Outcome reads a statement's answer columns in the order they decide.
func TestOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		changed, ok, runEnded bool
		want                  LockOutcome
	}{
		{true, true, false, LockWritten},
		{false, false, false, LockRefused},
		{false, true, false, LockRowChanged},
		{false, true, true, LockRunEnded},
	} {
		if got := Outcome(tc.changed, tc.ok, tc.runEnded); got != tc.want {
			t.Errorf("Outcome(%v, %v, %v): got %d, want %d", tc.changed, tc.ok, tc.runEnded, got, tc.want)
		}
	}
}
