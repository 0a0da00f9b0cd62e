package cli

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/httpapi"
)

// EnvCACert names a PEM file of CA certificates that the client commands
// and `clasp agent work` trust for an https:// server (--ca-cert too).
const EnvCACert = client.EnvCACert

// NetConfig is the transport security and the abuse limits of `clasp
// serve`. Zero fields take their defaults.
type NetConfig struct {
	// TLSCert and TLSKey are PEM files of the server's certificate (chain)
	// and private key: with both the server speaks HTTPS only, TLS 1.2 or
	// newer. One without the other is a usage error.
	TLSCert, TLSKey string
	// TLSClientCA is a PEM file of CA certificates: with it every client
	// must present a certificate signed by one of them (mTLS). Needs TLSCert.
	TLSClientCA string
	// InsecureHTTP allows plain HTTP on a non-loopback Listen address
	// (refused otherwise: bearer tokens would cross the network in clear).
	InsecureHTTP bool
	// Limits are the API's rate limits and caps (httpapi.Limits); zero
	// fields take httpapi's defaults, negative ones turn a limit off.
	Limits httpapi.Limits
	// TrustedProxies are IP addresses or CIDR prefixes of reverse proxies
	// whose X-Forwarded-For names the client (Limits.TrustedProxies).
	TrustedProxies []string
}

// scheme is "https" with TLS, else "http".
func (n NetConfig) scheme() string {
	if n.TLSCert != "" {
		return "https"
	}
	return "http"
}

// validate checks the transport flags against the --listen host: TLS
// files in pairs, a client CA only with TLS, and no plain HTTP on a
// non-loopback host without InsecureHTTP. Errors are usage errors.
func (n NetConfig) validate(listenHost string) error {
	if (n.TLSCert == "") != (n.TLSKey == "") {
		return usageErr(fmt.Errorf("--tls-cert and --tls-key go together: give both, or neither for plain HTTP"))
	}
	if n.TLSClientCA != "" && n.TLSCert == "" {
		return usageErr(fmt.Errorf("--tls-client-ca needs --tls-cert and --tls-key: client certificates are checked only over TLS"))
	}
	if n.TLSCert == "" && !n.InsecureHTTP && !isLoopbackHost(listenHost) {
		shown := listenHost
		if shown == "" {
			shown = "every interface"
		}
		return usageErr(fmt.Errorf("refusing plain HTTP on %s: tokens would travel in clear; give --tls-cert and --tls-key, listen on a loopback address, or pass --insecure-http (e.g. behind a TLS-terminating proxy)", shown))
	}
	if _, err := httpapi.ParseTrustedProxies(n.TrustedProxies); err != nil {
		return usageErr(fmt.Errorf("--trusted-proxy: %w", err))
	}
	return nil
}

// tls12Suites are the cipher suites offered to TLS 1.2 clients: ECDHE
// key exchange with an AEAD only (AES-GCM, ChaCha20-Poly1305); the CBC
// suites with SHA-1 and every RSA key exchange are left out. TLS 1.3's
// suites are all AEAD and not configurable.
var tls12Suites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// tlsConfig loads the certificate, key and client CA; nil without TLS.
// Errors name the file that could not be read or parsed.
func (n NetConfig) tlsConfig() (*tls.Config, error) {
	if n.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(n.TLSCert, n.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s / --tls-key %s: %w", n.TLSCert, n.TLSKey, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, CipherSuites: tls12Suites, Certificates: []tls.Certificate{cert}}
	if n.TLSClientCA != "" {
		pool, err := loadCertPool(n.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// limits returns the httpapi limits with the trusted proxies parsed.
func (n NetConfig) limits() (httpapi.Limits, error) {
	l := n.Limits
	p, err := httpapi.ParseTrustedProxies(n.TrustedProxies)
	if err != nil {
		return l, usageErr(fmt.Errorf("--trusted-proxy: %w", err))
	}
	l.TrustedProxies = p
	return l, nil
}

// loadCertPool reads a PEM file of certificates into a pool. Error: the
// file cannot be read or holds no certificate.
func loadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path) // #nosec G304 -- the operator names this file on the command line
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// addNetFlags registers serve's transport and limit flags on f.
func addNetFlags(f *pflag.FlagSet, n *NetConfig) {
	f.StringVar(&n.TLSCert, "tls-cert", "", "PEM certificate (chain) to serve HTTPS with (TLS 1.2 or newer); needs --tls-key")
	f.StringVar(&n.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	f.StringVar(&n.TLSClientCA, "tls-client-ca", "", "PEM CA certificates: require every client to present a certificate they signed (mTLS)")
	f.BoolVar(&n.InsecureHTTP, "insecure-http", false, "allow plain HTTP on a non-loopback --listen address (e.g. behind a TLS-terminating proxy)")
	f.Float64Var(&n.Limits.AddressRate, "rate-address", 0, fmt.Sprintf("requests per second one client address may send, sustained (0: %g; -1: no limit)", httpapi.DefaultAddressRate))
	f.IntVar(&n.Limits.AddressBurst, "rate-address-burst", 0, fmt.Sprintf("burst of --rate-address (0: %d)", httpapi.DefaultAddressBurst))
	f.Float64Var(&n.Limits.CredentialRate, "rate-credential", 0, fmt.Sprintf("requests per second one credential (key, run token, board token) may send, sustained (0: %g; -1: no limit)", httpapi.DefaultCredentialRate))
	f.IntVar(&n.Limits.CredentialBurst, "rate-credential-burst", 0, fmt.Sprintf("burst of --rate-credential (0: %d)", httpapi.DefaultCredentialBurst))
	f.IntVar(&n.Limits.CommentsPerAgentMinute, "rate-comments-per-agent", 0, fmt.Sprintf("comments an agent may write per minute, all its runs and keys together, on each replica (0: %d; -1: no limit)", httpapi.DefaultCommentsPerAgentMinute))
	f.IntVar(&n.Limits.CreatesPerAgentMinute, "rate-creates-per-agent", 0, fmt.Sprintf("issues, comments and runs an agent may create per minute together, on each replica (0: %d; -1: no limit)", httpapi.DefaultCreatesPerAgentMinute))
	f.IntVar(&n.Limits.LiveRunsPerAgent, "max-live-runs-per-agent", 0, fmt.Sprintf("live runs (queued, or running with an unexpired lease) an agent may have at once, across every replica; one more open is 429 (0: %d; -1: no cap)", httpapi.DefaultLiveRunsPerAgent))
	f.IntVar(&n.Limits.StreamsPerAgent, "max-streams-per-agent", 0, fmt.Sprintf("open event streams per agent, all its runs and keys together (the board: per credential), on each replica (0: %d; -1: no cap)", httpapi.DefaultStreamsPerAgent))
	// The names these limits had when they were counted per run and per
	// credential, kept working.
	f.IntVar(&n.Limits.CommentsPerAgentMinute, "rate-comments-per-run", 0, "")
	_ = f.MarkDeprecated("rate-comments-per-run", "use --rate-comments-per-agent: the allowance is the agent's, across all its runs")
	f.IntVar(&n.Limits.StreamsPerAgent, "max-streams-per-credential", 0, "")
	_ = f.MarkDeprecated("max-streams-per-credential", "use --max-streams-per-agent: an agent's streams are counted across all its keys and runs")
	f.IntVar(&n.Limits.Streams, "max-streams", 0, fmt.Sprintf("open event streams of this server in all (0: %d; -1: no cap)", httpapi.DefaultStreams))
	f.StringSliceVar(&n.TrustedProxies, "trusted-proxy", nil, "IP or CIDR of a reverse proxy whose X-Forwarded-For names the client (repeat or comma-separate); without it the header is ignored")
}
