package securitytest

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// pki is a CA made for one test, with a server certificate for 127.0.0.1
// and localhost and a client certificate, all written as PEM files.
type pki struct {
	CAFile, ServerCert, ServerKey, ClientCert, ClientKey string
	pool                                                 *x509.CertPool
	client                                               tls.Certificate
}

// newPKI makes the CA and certificates under t.TempDir().
func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "clasp test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	p := &pki{pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	p.CAFile = write("ca.pem", "CERTIFICATE", caDER)
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage) (certFile, keyFile string, pair tls.Certificate) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		certFile, keyFile = write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kder)
		pair, err = tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		return certFile, keyFile, pair
	}
	p.ServerCert, p.ServerKey, _ = leaf(2, "server", x509.ExtKeyUsageServerAuth)
	p.ClientCert, p.ClientKey, p.client = leaf(3, "client", x509.ExtKeyUsageClientAuth)
	return p
}

// httpsClient trusts p's CA, presents clientCert when given, and speaks
// at most TLS version maxVersion (0: any).
func (p *pki) httpsClient(withClientCert bool, maxVersion uint16) *http.Client {
	cfg := &tls.Config{RootCAs: p.pool, MaxVersion: maxVersion}
	if withClientCert {
		cfg.Certificates = []tls.Certificate{p.client}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
}

// get sends GET url with the bearer token and returns the status.
func get(hc *http.Client, url, token string) (int, error) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, nil
}

// cli runs the clasp binary with args and env (plus PATH and HOME) and
// returns its exit code and output.
func cli(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claspBin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("run clasp %v: %v", args, err)
	}
	return 0, string(out)
}

// TestTLSServe: with --tls-cert and --tls-key the server speaks HTTPS only,
// TLS 1.2 or newer (a TLS 1.1 client is refused, a plain HTTP request gets
// no API answer); the Go client (WithCACert, $CLASP_CA_CERT), the CLI
// (--ca-cert, $CLASP_CA_CERT) and `clasp agent work` trust the server
// through the CA file; the Go client and the CLI fail without it.
func TestTLSServe(t *testing.T) {
	p := newPKI(t)
	s := startServer(t, serveOpts{Args: []string{"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey}})
	if !strings.HasPrefix(s.URL, "https://") {
		t.Fatalf("server URL %s, want https://", s.URL)
	}
	if st, err := get(p.httpsClient(false, 0), s.URL+"/api/companies", s.BoardToken); err != nil || st != 200 {
		t.Fatalf("HTTPS GET: %d, %v; want 200", st, err)
	}
	if _, err := get(p.httpsClient(false, tls.VersionTLS11), s.URL+"/api/companies", s.BoardToken); err == nil {
		t.Errorf("a TLS 1.1 client was served, want the handshake refused")
	}
	plain := "http://" + strings.TrimPrefix(s.URL, "https://")
	if st, err := get(&http.Client{Timeout: 30 * time.Second}, plain+"/api/companies", s.BoardToken); err == nil && st == 200 {
		t.Errorf("plain HTTP to the TLS port answered 200")
	}

	// The Go client.
	ctx := context.Background()
	if _, err := client.New(s.URL, client.WithToken(s.BoardToken), client.WithCACert(p.CAFile)).CompanyList(ctx, client.ListParams{}); err != nil {
		t.Errorf("Go client with WithCACert: %v", err)
	}
	if _, err := client.New(s.URL, client.WithToken(s.BoardToken)).CompanyList(ctx, client.ListParams{}); err == nil {
		t.Errorf("Go client without the CA trusted the test CA's certificate")
	}
	t.Setenv(client.EnvCACert, p.CAFile)
	if _, err := client.New(s.URL, client.WithToken(s.BoardToken)).CompanyList(ctx, client.ListParams{}); err != nil {
		t.Errorf("Go client with $%s: %v", client.EnvCACert, err)
	}
	os.Unsetenv(client.EnvCACert)

	// The CLI.
	tok := "CLASP_TOKEN=" + s.BoardToken
	if code, out := cli(t, []string{tok}, "company", "create", "TLS Co", "--prefix", "TLSC", "--url", s.URL, "--ca-cert", p.CAFile, "--json"); code != 0 {
		t.Fatalf("clasp company create --ca-cert: exit %d\n%s", code, out)
	}
	if code, out := cli(t, []string{tok, "CLASP_CA_CERT=" + p.CAFile}, "company", "list", "--url", s.URL); code != 0 || !strings.Contains(out, "TLSC") {
		t.Errorf("clasp company list with $CLASP_CA_CERT: exit %d\n%s", code, out)
	}
	if code, out := cli(t, []string{tok}, "company", "list", "--url", s.URL); code == 0 {
		t.Errorf("clasp company list without a CA file trusted the test CA:\n%s", out)
	}

	// clasp agent work: an agent with no issue to work on exits 0.
	var co struct{ ID string }
	_, out := cli(t, []string{tok, "CLASP_CA_CERT=" + p.CAFile}, "company", "list", "--url", s.URL, "--json")
	var cos []struct{ ID string }
	if err := json.Unmarshal([]byte(out), &cos); err != nil || len(cos) != 1 {
		t.Fatalf("company list --json: %v\n%s", err, out)
	}
	co = cos[0]
	b := client.New(s.URL, client.WithToken(s.BoardToken), client.WithCACert(p.CAFile))
	ag, err := b.AgentCreate(ctx, co.ID, client.AgentCreateRequest{Name: "tls-worker"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := b.AgentKeyCreate(ctx, ag.ID)
	if err != nil {
		t.Fatal(err)
	}
	if code, out := cli(t, []string{"CLASP_TOKEN=" + key.Token}, "agent", "work", "--url", s.URL, "--ca-cert", p.CAFile); code != 0 {
		t.Errorf("clasp agent work --ca-cert: exit %d\n%s", code, out)
	}
}

// TestMutualTLS: with --tls-client-ca a client must present a certificate
// the CA signed; without one the handshake fails before any request.
func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	s := startServer(t, serveOpts{Args: []string{"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey, "--tls-client-ca", p.CAFile}})
	if st, err := get(p.httpsClient(true, 0), s.URL+"/api/companies", s.BoardToken); err != nil || st != 200 {
		t.Fatalf("with a client certificate: %d, %v; want 200", st, err)
	}
	if st, err := get(p.httpsClient(false, 0), s.URL+"/api/companies", s.BoardToken); err == nil {
		t.Errorf("without a client certificate: answered %d, want the handshake refused", st)
	}
}

// TestPlainHTTPOffLoopbackRefused: `clasp serve` refuses plain HTTP on a
// non-loopback address (exit 2, naming the flags), unless --insecure-http;
// TLS flags must come in pairs.
func TestPlainHTTPOffLoopbackRefused(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--listen", "0.0.0.0:0"},
		{"--listen", ":0"},
		{"--listen", "127.0.0.1:0", "--tls-cert", "x.pem"},
		{"--listen", "127.0.0.1:0", "--tls-client-ca", "x.pem"},
	} {
		code, out := cli(t, nil, append([]string{"serve", "--data-dir", filepath.Join(dir, "d")}, args...)...)
		if code != 2 || !strings.Contains(out, "--tls-") {
			t.Errorf("serve %v: exit %d, want 2 naming the TLS flags\n%s", args, code, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "d")); err == nil {
		t.Errorf("a refused serve created its data directory")
	}
	// --insecure-http starts it (bound on every interface; the test talks to it on loopback only).
	s := startServer(t, serveOpts{Args: []string{"--listen", "0.0.0.0:0", "--insecure-http"}})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.URL, "http://"))
	if st, err := get(&http.Client{Timeout: 30 * time.Second}, "http://127.0.0.1:"+port+"/api/companies", s.BoardToken); err != nil || st != 200 {
		t.Errorf("--insecure-http server: %d, %v", st, err)
	}
}

// TestHeaderLimitsOfTheBinary: the real server answers a header over
// 64 KiB with a JSON 431 and cuts off a header over 128 KiB (net/http's
// default would read 1 MiB), and closes a connection whose header never
// ends (ReadHeaderTimeout).
func TestHeaderLimitsOfTheBinary(t *testing.T) {
	s := startServer(t, serveOpts{})
	hc := &http.Client{Timeout: 30 * time.Second}
	send := func(pad int) (int, string) {
		req, _ := http.NewRequest("GET", s.URL+"/api/companies", nil)
		req.Header.Set("Authorization", "Bearer "+s.BoardToken)
		req.Header.Set("X-Pad", strings.Repeat("p", pad))
		res, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header.Get("Content-Type") + " " + string(b)
	}
	if st, body := send(80 << 10); st != 431 || !strings.Contains(body, `"code":"headers_too_large"`) || !strings.HasPrefix(body, "application/json") {
		t.Errorf("80 KiB header: %d %.200s; want a JSON 431 headers_too_large", st, body)
	}
	if st, body := send(200 << 10); st != 431 {
		t.Errorf("200 KiB header: %d %.200s; want 431 from net/http (MaxHeaderBytes)", st, body)
	}
	if st, _ := send(1 << 10); st != 200 {
		t.Errorf("1 KiB header: %d, want 200", st)
	}

	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "GET /api/companies HTTP/1.1\r\nHost: x\r\n") // and never the blank line
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = bufio.NewReader(conn).ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept a connection with an unfinished header open for 30 s")
	}
	t.Logf("unfinished header: connection closed after %v (%v)", time.Since(start).Round(10*time.Millisecond), err)
}

// TestManagedAgentTrustsTLSServer: a server-managed agent of an HTTPS
// server is told which CA file to trust (CLASP_CA_CERT and
// NODE_EXTRA_CA_CERTS): serve's --ca-cert when given, else its own
// --tls-cert file; the clasp CLI run by the agent then reaches the API.
func TestManagedAgentTrustsTLSServer(t *testing.T) {
	p := newPKI(t)
	script := `echo "ca=$CLASP_CA_CERT node=$NODE_EXTRA_CA_CERTS"
CLASP_TOKEN="$CLASP_API_KEY" CLASP_URL="$CLASP_API_URL" "$AGENT_CLASP_BIN" agent me --json && echo "agent me: ok"`
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"--ca-cert":           {[]string{"--ca-cert", p.CAFile}, p.CAFile},
		"the --tls-cert file": {nil, p.ServerCert},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"--tls-cert", p.ServerCert, "--tls-key", p.ServerKey}, tc.args...)
			s := startServer(t, serveOpts{Args: args})
			s.CAFile = p.CAFile
			ag := s.managedAgent(t, script, map[string]string{"AGENT_CLASP_BIN": claspBin})
			id := s.wake(t, ag)
			r := s.waitRun(t, id)
			log := s.runLog(t, id)
			if !strings.Contains(log, "ca="+tc.want+" node="+tc.want) {
				t.Errorf("the agent's CA variables, want both %s; log:\n%s", tc.want, log)
			}
			if r.Status != clasp.RunSucceeded || !strings.Contains(log, "agent me: ok") || !strings.Contains(log, ag.ID) {
				t.Errorf("run %s; the agent did not reach the API over HTTPS; log:\n%s", r.Status, log)
			}
		})
	}
}
