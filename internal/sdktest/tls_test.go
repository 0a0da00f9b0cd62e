package sdktest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/serveproc"
)

// TestTLS runs the checkout scenario of each client against `clasp serve`
// over HTTPS with a certificate of a private CA: each trusts it when told
// (CLASP_CA_CERT for Python and Go; NODE_EXTRA_CA_CERTS for Node, whose
// fetch takes no CA of its own), and refuses the server otherwise.
func TestTLS(t *testing.T) {
	caFile, certFile, keyFile := privateCA(t)
	srv, err := serveproc.StartServer(t.Context(), serveproc.ServerConfig{Binary: claspBin,
		Args: []string{"--data-dir", filepath.Join(t.TempDir(), "data"), "--tls-cert", certFile, "--tls-key", keyFile}})
	if err != nil {
		t.Fatalf("start clasp serve over TLS: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	url := "https://" + strings.TrimPrefix(srv.Addr(), "https://")
	s := &server{srv: srv, url: url, board: client.New(url, client.WithToken(srv.BoardToken()), client.WithCACert(caFile))}
	trust := map[string]string{"python": "CLASP_CA_CERT", "typescript": "NODE_EXTRA_CA_CERTS", "go": "CLASP_CA_CERT"}
	for _, l := range append(languages(t), goClient) {
		t.Run(l.name, func(t *testing.T) {
			l.ready(t)
			f := newFixture(t, s, 1)
			got := runScript(t, l, "checkout", s, f, "SCN_ISSUE="+f.issues[0].Identifier, trust[l.name]+"="+caFile)
			if num(got, "epoch") != 1 {
				t.Errorf("checkout over TLS answered %v, want epoch 1", got)
			}
			runOf(t, s, str(got, "run"), clasp.RunSucceeded)

			// Without the CA the server's certificate is refused: the
			// script fails and nothing is checked out.
			p := startScript(t, l, "checkout", s, f, "SCN_ISSUE="+f.issues[0].Identifier)
			for range p.lines {
			}
			if err := <-p.done; err == nil {
				t.Errorf("%s checked out over TLS without trusting the CA", l.name)
			}
		})
	}
}

// privateCA writes a CA and a server certificate for 127.0.0.1 signed by
// it, as PEM files under t.TempDir().
func privateCA(t *testing.T) (caFile, certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "clasp sdktest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "server"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", der), write("server-key.pem", "EC PRIVATE KEY", kder)
}
