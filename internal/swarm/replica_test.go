package swarm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/clasp-dev/clasp/internal/serveproc"
	"github.com/clasp-dev/clasp/internal/swarm"
)

// TestSwarmAcrossReplicas runs `clasp swarm --database-url` on a fresh
// PostgreSQL database: 2 replicas of `clasp serve`, 4
// agents spread over them, a fifth of the checkouts answered by a SIGKILL
// of the agent and a replica SIGKILLed and restarted every 300 ms. It must
// exit 0: every issue done once with its result, no lock or live run
// left, and every checkout and result an agent saw acknowledged found in
// the database. Skipped without CLASP_TEST_POSTGRES_URL, unless CI is set.
// Not parallel: a swarm keeps both cores busy.
func TestSwarmAcrossReplicas(t *testing.T) {
	admin := os.Getenv(serveproc.EnvTestPostgresURL)
	if admin == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set, and CI is: the PostgreSQL tests must run in CI", serveproc.EnvTestPostgresURL)
		}
		t.Skipf("%s is not set: no PostgreSQL to test against", serveproc.EnvTestPostgresURL)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	dbURL, drop, err := serveproc.CreateDatabase(ctx, admin, "clasp_swarm")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(context.Background()); err != nil {
			t.Error(err)
		}
	})

	dir := t.TempDir()
	writeTree(t, dir, 60)
	cmd := exec.Command(claspBin, "swarm", "--dir", dir, "--database-url", dbURL, "--replicas", "2",
		"--agents", "4", "--kill-rate", "0.2", "--slow", "30ms", "--kill-replica-every", "300ms",
		"--lease-ttl", "1s", "--sweep-interval", "200ms", "--timeout", "4m", "--json")
	cmd.Env = append(os.Environ(), "CLASP_TOKEN=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	t.Logf("stderr:\n%s", stderr.String())
	if err != nil {
		t.Fatalf("clasp swarm: %v\nstdout:\n%s", err, stdout.String())
	}
	var rep swarm.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decode report: %v\n%s", err, stdout.String())
	}
	if rep.Replicas != 2 {
		t.Errorf("replicas %d, want 2", rep.Replicas)
	}
	if rep.ReplicaRestarts != rep.ReplicaKills {
		t.Errorf("%d replica kills but %d restarts", rep.ReplicaKills, rep.ReplicaRestarts)
	}
	if rep.Issues != 60 || rep.Done != 60 {
		t.Errorf("issues %d, done %d; want 60, 60", rep.Issues, rep.Done)
	}
	if rep.AcksChecked < rep.Done {
		t.Errorf("%d acknowledged writes checked, want at least one result per issue (%d)", rep.AcksChecked, rep.Done)
	}
	if len(rep.Violations) != 0 {
		t.Errorf("violations: %v", rep.Violations)
	}
	t.Logf("replica kills %d, agent kills %d, acknowledged writes checked %d", rep.ReplicaKills, rep.Kills, rep.AcksChecked)
}
