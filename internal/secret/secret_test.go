package secret

import (
	"strings"
	"testing"
)

func TestNewChecks(t *testing.T) {
	for _, kind := range []string{AgentKey, RunToken, Board} {
		tok := New(kind)
		if len(tok) != Len || !strings.HasPrefix(tok, Prefix+kind+"_") {
			t.Fatalf("New(%s) = %q (len %d), want clasp_%s_... of length %d", kind, tok, len(tok), kind, Len)
		}
		if k, f := Check(tok); k != kind || f != Current {
			t.Errorf("Check(%q) = %q, %v; want %q, Current", tok, k, f, kind)
		}
		if id := ID(tok); id != tok[:IDPrefixLen] {
			t.Errorf("ID(%q) = %q", tok, id)
		}
	}
	if a, b := New(AgentKey), New(AgentKey); a == b {
		t.Error("two keys are equal")
	}
}

// Every one-character change and every truncation of a current-format
// credential is Malformed (the checksum, or the length, catches it).
func TestTyposAreMalformed(t *testing.T) {
	tok := New(AgentKey)
	alphabet := "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
	for i := len(Prefix) + 3; i < len(tok); i++ {
		for _, c := range []byte(alphabet) {
			if c == tok[i] {
				continue
			}
			typo := tok[:i] + string(c) + tok[i+1:]
			if _, f := Check(typo); f != Malformed {
				t.Fatalf("Check(%q) (position %d changed) = %v, want Malformed", typo, i, f)
			}
		}
	}
	for n := len(Prefix) + 3; n < len(tok); n++ {
		if n == LegacyLen {
			continue // a legacy-length string of base64url characters is a legacy key
		}
		if _, f := Check(tok[:n]); f != Malformed {
			t.Errorf("Check(truncated to %d) = %v, want Malformed", n, f)
		}
	}
}

func TestCheckForms(t *testing.T) {
	legacy := "clasp_ak_" + strings.Repeat("A", 40) + "x-_"
	for _, c := range []struct {
		tok  string
		kind string
		form Form
	}{
		{legacy, AgentKey, Legacy},
		{"clasp_rt_" + strings.Repeat("A", 42) + "!", RunToken, Malformed},
		{"clasp_ak_short", AgentKey, Malformed},
		{"clasp_zz_" + strings.Repeat("A", 43), "", NotClasp},
		{"pcp_something", "", NotClasp},
		{"", "", NotClasp},
	} {
		if k, f := Check(c.tok); k != c.kind || f != c.form {
			t.Errorf("Check(%q) = %q, %v; want %q, %v", c.tok, k, f, c.kind, c.form)
		}
	}
	if ID(legacy) != legacy[:12] {
		t.Errorf("ID(legacy) = %q", ID(legacy))
	}
}

func TestMask(t *testing.T) {
	ak, rt := New(AgentKey), New(RunToken)
	legacy := "clasp_bt_" + strings.Repeat("Z", 43)
	in := "key=" + ak + " run " + rt + "\n" + legacy + " other-secret tail"
	got := Mask(in, "other-secret", "")
	for _, s := range []string{ak, rt, legacy, "other-secret", ak[IDPrefixLen:]} {
		if strings.Contains(got, s) {
			t.Errorf("Mask left %q in %q", s, got)
		}
	}
	want := "key=clasp_ak_[masked] run clasp_rt_[masked]\nclasp_bt_[masked] [masked] tail"
	if got != want {
		t.Errorf("Mask = %q, want %q", got, want)
	}
	if Mask("no secrets here") != "no secrets here" {
		t.Error("Mask changed text without credentials")
	}
}

// Streaming: feeding any split of a text through Pending and MaskBytes
// gives the same masked output as masking it whole.
func TestPendingSplits(t *testing.T) {
	rt := New(RunToken)
	text := "start clasp_ak_" + strings.Repeat("q", 43) + " mid " + rt + " value:SECRETVALUE end clasp_"
	want := Mask(text, "SECRETVALUE")
	for i := 0; i <= len(text); i++ {
		for j := i; j <= len(text); j += 7 {
			var out, pend []byte
			for _, part := range []string{text[:i], text[i:j], text[j:]} {
				data := append(pend, part...)
				h := Pending(data, 512, "SECRETVALUE")
				out = append(out, MaskBytes(data[:len(data)-h], "SECRETVALUE")...)
				pend = append([]byte(nil), data[len(data)-h:]...)
			}
			out = append(out, MaskBytes(pend, "SECRETVALUE")...)
			if string(out) != want {
				t.Fatalf("split at %d, %d: %q, want %q", i, j, out, want)
			}
		}
	}
}
