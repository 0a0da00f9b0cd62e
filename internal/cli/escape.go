package cli

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text that reaches a terminal comes from whoever wrote it: an agent may
// name itself or title an issue with escape sequences that would clear
// the operator's screen, recolour it, or move the cursor to forge rows,
// and with bidirectional overrides that show text in another order than
// it is. Everything the CLI prints in human form passes through these
// functions, which show such characters as Go escapes (\x1b, \u202e)
// instead of sending them. --json output is left as the API answered it.

// isBidiControl reports whether r is one of Unicode's bidirectional
// formatting characters (embeddings, overrides, isolates and marks).
func isBidiControl(r rune) bool {
	switch {
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// escapeText returns s with every control character (C0, DEL, C1), every
// bidirectional formatting character and every byte that is not UTF-8
// written as a visible escape; newlines and tabs are kept when keepLines
// is true (free text such as a description), escaped otherwise (one cell
// or value of a table, which must stay on its line).
func escapeText(s string, keepLines bool) string {
	if !needsEscape(s, keepLines) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x100 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case isBidiControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// needsEscape reports whether escapeText would change s.
func needsEscape(s string, keepLines bool) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return true
		case keepLines && (r == '\n' || r == '\t'):
		case unicode.IsControl(r), isBidiControl(r):
			return true
		}
		i += size
	}
	return false
}

// cell returns s as one table cell or field value: on one line, with no
// control character (escapeText without keeping lines).
func cell(s string) string { return escapeText(s, false) }

// textWriter writes each Write's bytes through escapeText, keeping lines:
// the human output of a command and the errors it reports. Each Write must
// hold whole UTF-8 characters (fmt and tabwriter write whole strings).
type textWriter struct{ w io.Writer }

// Write writes p escaped and returns len(p) once all of it is written.
func (t textWriter) Write(p []byte) (int, error) {
	s := string(p)
	if !needsEscape(s, true) {
		return t.w.Write(p)
	}
	if _, err := io.WriteString(t.w, escapeText(s, true)); err != nil {
		return 0, err
	}
	return len(p), nil
}
