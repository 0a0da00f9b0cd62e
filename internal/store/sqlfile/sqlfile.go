// Package sqlfile reads the named SQL statements of a store dialect from
// .sql files. A file holds blocks; each starts with a line
//
//	-- name: Checkout
//
// and runs to the next such line or the end of the file. The block's text
// (its comments included, trailing blank lines and a final semicolon
// removed) is the statement exactly as the dialect prepares it: nothing is
// assembled from Go. Before the first block a file may hold only comments
// and blank lines.
package sqlfile

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
)

// Statement is one named block: its name, the file and line of its
// "-- name:" line, its doc (the comment lines right after the name line,
// without their "--") and its text, from its first line that is not a
// comment (comments further in, such as rule tags, stay in the text).
type Statement struct {
	Name string
	File string
	Line int
	Doc  string
	SQL  string
}

// Set is the statements of a dialect by name.
type Set struct {
	byName map[string]Statement
	names  []string // sorted
}

var (
	nameLine  = regexp.MustCompile(`^--\s*name\s*:(.*)$`)
	validName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
)

// Parse reads the blocks of one file's text; file names it in errors. It
// fails on a name that is empty or not an upper-camel-case identifier, on
// text before the first block that is not a comment, and on a block with
// no statement (only comments or blank lines).
func Parse(file, text string) ([]Statement, error) {
	var (
		out []Statement
		cur *Statement
		buf []string
	)
	flush := func() error {
		if cur == nil {
			return nil
		}
		cur.Doc = strings.TrimSuffix(cur.Doc, "\n")
		for len(buf) > 0 && strings.TrimSpace(buf[len(buf)-1]) == "" {
			buf = buf[:len(buf)-1]
		}
		sql := strings.TrimSuffix(strings.TrimRight(strings.Join(buf, "\n"), " \t\n"), ";")
		if !hasStatement(sql) {
			return fmt.Errorf("%s:%d: statement %s is empty", file, cur.Line, cur.Name)
		}
		cur.SQL = sql
		out = append(out, *cur)
		cur = nil
		return nil
	}
	for i, line := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		trimmed := strings.TrimSpace(line)
		if m := nameLine.FindStringSubmatch(trimmed); m != nil {
			if err := flush(); err != nil {
				return nil, err
			}
			name := strings.TrimSpace(m[1])
			if !validName.MatchString(name) {
				return nil, fmt.Errorf("%s:%d: statement name %q: want an upper-camel-case identifier", file, i+1, name)
			}
			cur, buf = &Statement{Name: name, File: file, Line: i + 1}, nil
			continue
		}
		if cur == nil {
			if trimmed != "" && !strings.HasPrefix(trimmed, "--") {
				return nil, fmt.Errorf("%s:%d: SQL before the first \"-- name:\" line", file, i+1)
			}
			continue
		}
		if len(buf) == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "--")) {
			if trimmed != "" { // the statement's doc
				cur.Doc += strings.TrimSpace(strings.TrimPrefix(trimmed, "--")) + "\n"
			}
			continue
		}
		buf = append(buf, line)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// hasStatement reports whether sql holds anything but comments and blanks.
func hasStatement(sql string) bool {
	for _, line := range strings.Split(sql, "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "--") {
			return true
		}
	}
	return false
}

// Load parses every file of fsys matching pattern (path.Match syntax, e.g.
// "sql/*.sql"), in name order. It fails on a parse error, on a name
// defined twice (in one file or two; both places are named), and when no
// file matches.
func Load(fsys fs.FS, pattern string) (*Set, error) {
	files, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, fmt.Errorf("sql files %s: %w", pattern, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("sql files %s: no file matches", pattern)
	}
	sort.Strings(files)
	set := &Set{byName: map[string]Statement{}}
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, fmt.Errorf("sql file %s: %w", f, err)
		}
		stmts, err := Parse(path.Base(f), string(b))
		if err != nil {
			return nil, err
		}
		for _, st := range stmts {
			if prev, ok := set.byName[st.Name]; ok {
				return nil, fmt.Errorf("%s:%d: statement %s is defined again (first at %s:%d)", st.File, st.Line, st.Name, prev.File, prev.Line)
			}
			set.byName[st.Name] = st
			set.names = append(set.names, st.Name)
		}
	}
	sort.Strings(set.names)
	return set, nil
}

// Derive adds statement name: statement from with the one occurrence of
// old in its SQL replaced by new, and doc as its Doc. It fails, adding
// nothing, when from does not exist, name already does, or old occurs in
// from's SQL other than exactly once (so an edit of from that moves the
// replaced text fails at load, not at run time).
func (s *Set) Derive(name, from, old, new, doc string) error {
	src, ok := s.byName[from]
	if !ok {
		return fmt.Errorf("derive statement %s: no statement %s", name, from)
	}
	if prev, ok := s.byName[name]; ok {
		return fmt.Errorf("derive statement %s: it is already defined at %s:%d", name, prev.File, prev.Line)
	}
	if n := strings.Count(src.SQL, old); n != 1 {
		return fmt.Errorf("derive statement %s from %s (%s:%d): %q occurs %d times in it, want once", name, from, src.File, src.Line, old, n)
	}
	st := src
	st.Name, st.Doc, st.SQL = name, doc, strings.Replace(src.SQL, old, new, 1)
	s.byName[name] = st
	s.names = append(s.names, name)
	sort.Strings(s.names)
	return nil
}

// Cut adds statement name: statement from without its marked regions,
// and doc as its Doc. A region runs from a line that is exactly begin
// (leading and trailing blanks aside) through the next line that is
// exactly end, both included. It fails, adding nothing, when from does
// not exist, name already does, from has no region, or a begin line has
// no end line after it or an end line no begin before it (so an edit of
// from that breaks a region fails at load, not at run time).
func (s *Set) Cut(name, from, begin, end, doc string) error {
	src, ok := s.byName[from]
	if !ok {
		return fmt.Errorf("cut statement %s: no statement %s", name, from)
	}
	if prev, ok := s.byName[name]; ok {
		return fmt.Errorf("cut statement %s: it is already defined at %s:%d", name, prev.File, prev.Line)
	}
	var (
		kept    []string
		in      bool
		regions int
	)
	for _, line := range strings.Split(src.SQL, "\n") {
		switch t := strings.TrimSpace(line); {
		case t == begin && in, t == end && !in:
			return fmt.Errorf("cut statement %s from %s (%s:%d): %q where a region does not allow it", name, from, src.File, src.Line, t)
		case t == begin:
			in, regions = true, regions+1
		case t == end:
			in = false
		case !in:
			kept = append(kept, line)
		}
	}
	switch {
	case in:
		return fmt.Errorf("cut statement %s from %s (%s:%d): a region %q has no %q after it", name, from, src.File, src.Line, begin, end)
	case regions == 0:
		return fmt.Errorf("cut statement %s from %s (%s:%d): no region %q", name, from, src.File, src.Line, begin)
	}
	st := src
	st.Name, st.Doc, st.SQL = name, doc, strings.Join(kept, "\n")
	s.byName[name] = st
	s.names = append(s.names, name)
	sort.Strings(s.names)
	return nil
}

// Names returns every statement name, sorted.
func (s *Set) Names() []string { return append([]string(nil), s.names...) }

// Get returns the statement called name.
func (s *Set) Get(name string) (Statement, bool) {
	st, ok := s.byName[name]
	return st, ok
}

// SQL returns the text of statement name, or "" when there is none.
func (s *Set) SQL(name string) string { return s.byName[name].SQL }

// IsSelect reports whether sql, past its leading comments, is a SELECT:
// a statement a read-only connection can prepare.
func IsSelect(sql string) bool {
	for _, line := range strings.Split(sql, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		return strings.HasPrefix(strings.ToUpper(t), "SELECT")
	}
	return false
}
