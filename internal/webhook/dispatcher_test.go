package webhook

import (
	"net"
	"testing"
	"time"
)

// TestCheckAddr: the addresses a delivery may not reach without
// AllowPrivate (RULES.md W5), and public ones it may.
func TestCheckAddr(t *testing.T) {
	refused := []string{"127.0.0.1", "127.1.2.3", "::1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254",
		"fe80::1", "fc00::1", "fd12::1", "0.0.0.0", "::", "100.64.0.1", "224.0.0.1", "ff02::1", "255.255.255.255",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "0.1.2.3"}
	for _, s := range refused {
		if err := CheckAddr(net.ParseIP(s)); err == nil {
			t.Errorf("%s: allowed, want refused", s)
		}
	}
	for _, s := range []string{"93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "8.8.8.8", "100.128.0.1"} {
		if err := CheckAddr(net.ParseIP(s)); err != nil {
			t.Errorf("%s: %v, want allowed", s, err)
		}
	}
	if CheckAddr(nil) == nil {
		t.Error("nil: allowed")
	}
}

// TestBackoff: attempt n waits RetryBase·2^(n-1), capped at RetryMax, less
// at most half of it (jitter) (RULES.md W2).
func TestBackoff(t *testing.T) {
	d := New(nil, Config{RetryBase: 10 * time.Second, RetryMax: time.Hour})
	for n := 1; n <= 20; n++ {
		full := 10 * time.Second << (n - 1)
		if n > 9 {
			full = time.Hour
		}
		full = min(full, time.Hour)
		for range 50 {
			if got := d.backoff(n); got > full || got < full/2 {
				t.Fatalf("attempt %d: delay %s, want within [%s, %s]", n, got, full/2, full)
			}
		}
	}
}
