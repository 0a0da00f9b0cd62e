package heartbeat

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestGroupAliveIgnoresZombies: a process group whose only member has
// exited but is not yet reaped is not alive (terminate must not wait out
// its grace period for it), while a running member is.
func TestGroupAliveIgnoresZombies(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !groupAlive(pid) {
		t.Fatal("the group of a running sleep is not alive")
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	// Not reaped yet: the leader is a zombie until Wait.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := ProcStart(pid); !ok {
			break // exited: a zombie (ProcStart refuses zombies)
		}
		if time.Now().After(deadline) {
			t.Fatal("sleep did not exit after SIGKILL")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if syscall.Kill(-pid, 0) != nil {
		t.Fatal("the zombie's group is already gone: the check below would prove nothing")
	}
	if groupAlive(pid) {
		t.Error("a group whose only member is a zombie counts as alive")
	}
	_ = cmd.Wait()
	if groupAlive(pid) {
		t.Error("a reaped group counts as alive")
	}
}
