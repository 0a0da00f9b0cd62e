package verify

import (
	"context"
	"strings"
	"testing"
)

// A failed restart or failover command's error carries the end of its
// stderr, so verify's report says why the database fault failed.
func TestRunDBCmdErrorCarriesStderrTail(t *testing.T) {
	c := &cluster{}
	script := `echo killed_at_unix_ns=1; for i in 1 2 3 4 5 6 7 8 9 10; do echo "line $i" >&2; done; echo 'FATAL: lock file already exists' >&2; exit 1`
	out, err := c.runDBCmd(context.Background(), script)
	if err == nil {
		t.Fatal("runDBCmd of a command that exits 1: no error")
	}
	if !strings.Contains(out, "killed_at_unix_ns=1") {
		t.Errorf("stdout %q: want the killed_at line", out)
	}
	msg := err.Error()
	if !strings.Contains(msg, "exit status 1") || !strings.Contains(msg, "FATAL: lock file already exists") {
		t.Errorf("error %q: want the exit status and the last stderr line", msg)
	}
	if strings.Contains(msg, "line 3\n") || !strings.Contains(msg, "line 4") {
		t.Errorf("error %q: want exactly the last %d stderr lines", msg, dbCmdErrLines)
	}
	if err := c.restartDB(context.Background(), "echo fine >&2"); err != nil {
		t.Errorf("restartDB of a command that succeeds: %v", err)
	}
}
