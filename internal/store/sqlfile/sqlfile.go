// Package sqlfile reads the named SQL statements of a store dialect from
// .sql files. A file holds blocks; each starts with a line
//
//	-- name: Checkout
//
// and runs to the next block's first line or the end of the file. The
// block's text (its comments included, trailing blank lines and a final
// semicolon removed) is the statement exactly as the dialect prepares it,
// once its fragments are expanded. The only statements made in Go are
// variants a dialect derives from a block by one named, checked edit
// (Set.Derive replaces one line, Set.Cut removes marked regions); the
// golden files of each dialect hold every final text. Before the first
// block a file may hold only comments and blank lines.
//
// A fragment is SQL text that statements share, written once. Its block
// starts with a line
//
//	-- fragment: run_live(r)
//
// giving its name (lower case, digits and underscores) and its parameters
// (none or more, each a name its text uses as a table alias); its doc and
// text are read as a statement's (a final semicolon stays). A statement,
// or a fragment below it (in its file or a later one), uses it as
//
//	{{run_live c}}
//
// its name and one argument per parameter, separated by blanks, within
// one line. Load replaces each use with the fragment's text in which each
// parameter, wherever it stands as a whole word, is replaced by its
// argument. The argument "-" stands for no alias: the parameter goes with
// the dot after it, so {{run_live -}} gives status where {{run_live c}}
// gives c.status. The lines of a fragment's text after its first are
// indented by the indentation of the line of the use, so a statement
// expands to the text it would hold written out. Load fails, naming the
// file and line, on a use of a fragment that is not defined (or, in a
// fragment, not defined above it), a use with the wrong number of
// arguments or with "-" for a parameter its text uses other than before
// a dot, a fragment defined twice, and a fragment nothing uses.
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
// Parse returns the text as written; Load's statements have their
// fragments expanded.
type Statement struct {
	Name string
	File string
	Line int
	Doc  string
	SQL  string

	sqlLine int // the line of SQL's first line in File
}

// Fragment is one fragment block: its name, its parameters, the file and
// line of its "-- fragment:" line, its doc and its text (as Statement's).
type Fragment struct {
	Name   string
	Params []string
	File   string
	Line   int
	Doc    string
	SQL    string

	sqlLine int // the line of SQL's first line in File
}

// Set is the statements of a dialect by name.
type Set struct {
	byName map[string]Statement
	names  []string // sorted
}

var (
	nameLine     = regexp.MustCompile(`^--\s*name\s*:(.*)$`)
	validName    = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	fragmentLine = regexp.MustCompile(`^--\s*fragment\s*:(.*)$`)
	fragmentHead = regexp.MustCompile(`^([a-z][a-z0-9_]*)\s*\(([^()]*)\)$`)
	validParam   = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	validArg     = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*|-)$`)
	fragmentUse  = regexp.MustCompile(`\{\{(.*?)\}\}`)
)

// block is a statement or a fragment being read.
type block struct {
	fragment bool
	name     string
	params   []string
	line     int
	doc      string
	buf      []string
	sqlLine  int
}

// Parse reads the blocks of one file's text; file names it in errors. It
// returns the file's statements and fragments in the order written, their
// text as written (fragment uses not expanded). It fails on a statement
// name that is empty or not an upper-camel-case identifier, on a fragment
// line that is not a lower-case name and its parameters in parentheses
// (distinct names, separated by commas), on text before the first block
// that is not a comment, and on a block with no SQL (only comments or
// blank lines).
func Parse(file, text string) ([]Statement, []Fragment, error) {
	var (
		stmts []Statement
		frags []Fragment
		cur   *block
	)
	flush := func() error {
		if cur == nil {
			return nil
		}
		doc := strings.TrimSuffix(cur.doc, "\n")
		buf := cur.buf
		for len(buf) > 0 && strings.TrimSpace(buf[len(buf)-1]) == "" {
			buf = buf[:len(buf)-1]
		}
		sql := strings.TrimRight(strings.Join(buf, "\n"), " \t\n")
		kind := "statement"
		if cur.fragment {
			kind = "fragment"
		} else {
			sql = strings.TrimSuffix(sql, ";")
		}
		if !hasStatement(sql) {
			return fmt.Errorf("%s:%d: %s %s is empty", file, cur.line, kind, cur.name)
		}
		if cur.fragment {
			frags = append(frags, Fragment{Name: cur.name, Params: cur.params, File: file, Line: cur.line, Doc: doc, SQL: sql, sqlLine: cur.sqlLine})
		} else {
			stmts = append(stmts, Statement{Name: cur.name, File: file, Line: cur.line, Doc: doc, SQL: sql, sqlLine: cur.sqlLine})
		}
		cur = nil
		return nil
	}
	for i, line := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		trimmed := strings.TrimSpace(line)
		if m := nameLine.FindStringSubmatch(trimmed); m != nil {
			if err := flush(); err != nil {
				return nil, nil, err
			}
			name := strings.TrimSpace(m[1])
			if !validName.MatchString(name) {
				return nil, nil, fmt.Errorf("%s:%d: statement name %q: want an upper-camel-case identifier", file, i+1, name)
			}
			cur = &block{name: name, line: i + 1}
			continue
		}
		if m := fragmentLine.FindStringSubmatch(trimmed); m != nil {
			if err := flush(); err != nil {
				return nil, nil, err
			}
			name, params, err := fragmentHeader(strings.TrimSpace(m[1]))
			if err != nil {
				return nil, nil, fmt.Errorf("%s:%d: %w", file, i+1, err)
			}
			cur = &block{fragment: true, name: name, params: params, line: i + 1}
			continue
		}
		if cur == nil {
			if trimmed != "" && !strings.HasPrefix(trimmed, "--") {
				return nil, nil, fmt.Errorf("%s:%d: SQL before the first \"-- name:\" or \"-- fragment:\" line", file, i+1)
			}
			continue
		}
		if len(cur.buf) == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "--")) {
			if trimmed != "" { // the block's doc
				cur.doc += strings.TrimSpace(strings.TrimPrefix(trimmed, "--")) + "\n"
			}
			continue
		}
		if len(cur.buf) == 0 {
			cur.sqlLine = i + 1
		}
		cur.buf = append(cur.buf, line)
	}
	if err := flush(); err != nil {
		return nil, nil, err
	}
	return stmts, frags, nil
}

// fragmentHeader reads the text after "-- fragment:", such as
// "run_live(r)", and returns the fragment's name and parameters. It fails
// on a name or parameter that is not lower case, digits and underscores,
// on a parameter named twice, and on anything but name(params).
func fragmentHeader(head string) (string, []string, error) {
	m := fragmentHead.FindStringSubmatch(head)
	if m == nil {
		return "", nil, fmt.Errorf("fragment %q: want a lower-case name and its parameters, such as run_live(r)", head)
	}
	var params []string
	if strings.TrimSpace(m[2]) != "" {
		for _, p := range strings.Split(m[2], ",") {
			p = strings.TrimSpace(p)
			if !validParam.MatchString(p) {
				return "", nil, fmt.Errorf("fragment %s: parameter %q: want a lower-case name", m[1], p)
			}
			for _, q := range params {
				if q == p {
					return "", nil, fmt.Errorf("fragment %s: parameter %s is named twice", m[1], p)
				}
			}
			params = append(params, p)
		}
	}
	return m[1], params, nil
}

// expander expands fragment uses with the fragments defined so far.
type expander struct {
	defined map[string]*Fragment // expanded text
	later   map[string]Fragment  // every fragment, to tell "defined further on" from "not defined"
	used    map[string]bool
}

// expand returns sql, whose first line is line of file, with each fragment
// use replaced by its fragment's text (see the package doc). It fails,
// naming file and the line of the use, on a use of a fragment not in
// e.defined, with the wrong number of arguments, with a malformed argument
// or with "-" for a parameter used other than before a dot, and on a "{{"
// with no "}}" after it on its line.
func (e *expander) expand(sql, file string, line int) (string, error) {
	if !strings.Contains(sql, "{{") {
		return sql, nil
	}
	lines := strings.Split(sql, "\n")
	for i, l := range lines {
		if !strings.Contains(l, "{{") {
			continue
		}
		at := fmt.Sprintf("%s:%d", file, line+i)
		indent := l[:len(l)-len(strings.TrimLeft(l, " \t"))]
		var err error
		out := fragmentUse.ReplaceAllStringFunc(l, func(use string) string {
			if err != nil {
				return use
			}
			var text string
			text, err = e.use(strings.Fields(use[2:len(use)-2]), at)
			return strings.ReplaceAll(text, "\n", "\n"+indent)
		})
		if err != nil {
			return "", err
		}
		if strings.Contains(fragmentUse.ReplaceAllString(l, ""), "{{") {
			return "", fmt.Errorf("%s: a \"{{\" with no \"}}\" after it on its line", at)
		}
		lines[i] = out
	}
	return strings.Join(lines, "\n"), nil
}

// use returns the text of the use whose words (name, then arguments) are
// fields, at is its place for errors. It fails as expand does.
func (e *expander) use(fields []string, at string) (string, error) {
	if len(fields) == 0 {
		return "", fmt.Errorf("%s: a fragment use {{}} names no fragment", at)
	}
	name, args := fields[0], fields[1:]
	f, ok := e.defined[name]
	if !ok {
		if g, ok := e.later[name]; ok {
			return "", fmt.Errorf("%s: fragment %s is used above its definition (%s:%d)", at, name, g.File, g.Line)
		}
		return "", fmt.Errorf("%s: fragment %s is not defined", at, name)
	}
	if len(args) != len(f.Params) {
		return "", fmt.Errorf("%s: fragment %s(%s): %d arguments given, want %d", at, name, strings.Join(f.Params, ", "), len(args), len(f.Params))
	}
	for _, a := range args {
		if !validArg.MatchString(a) {
			return "", fmt.Errorf("%s: fragment %s: argument %q: want a name, or - for no alias", at, name, a)
		}
	}
	e.used[name] = true
	if len(args) == 0 {
		return f.SQL, nil
	}
	to := make(map[string]string, len(args))
	quoted := make([]string, len(args))
	for i, p := range f.Params {
		to[p], quoted[i] = args[i], regexp.QuoteMeta(p)
	}
	word := regexp.MustCompile(`\b(` + strings.Join(quoted, "|") + `)\b(\.?)`)
	var bare string
	text := word.ReplaceAllStringFunc(f.SQL, func(m string) string {
		p, dot := strings.CutSuffix(m, ".")
		switch {
		case to[p] != "-":
			return to[p] + m[len(p):]
		case dot:
			return ""
		default:
			bare = p
			return m
		}
	})
	if bare != "" {
		return "", fmt.Errorf("%s: fragment %s: argument - for parameter %s, which its text uses other than before a dot", at, name, bare)
	}
	return text, nil
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
// "sql/*.sql"), in name order, and returns its statements with their
// fragments expanded (see the package doc); a fragment may use the
// fragments defined above it, in its file or an earlier one. It fails on
// a parse error, on a statement or fragment name defined twice (in one
// file or two; both places are named), on a use of a fragment that cannot
// be expanded (named by file and line), on a fragment nothing uses, and
// when no file matches.
func Load(fsys fs.FS, pattern string) (*Set, error) {
	files, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, fmt.Errorf("sql files %s: %w", pattern, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("sql files %s: no file matches", pattern)
	}
	sort.Strings(files)
	var (
		stmts []Statement
		frags []Fragment
		e     = expander{defined: map[string]*Fragment{}, later: map[string]Fragment{}, used: map[string]bool{}}
	)
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, fmt.Errorf("sql file %s: %w", f, err)
		}
		st, fr, err := Parse(path.Base(f), string(b))
		if err != nil {
			return nil, err
		}
		for _, fg := range fr {
			if prev, ok := e.later[fg.Name]; ok {
				return nil, fmt.Errorf("%s:%d: fragment %s is defined again (first at %s:%d)", fg.File, fg.Line, fg.Name, prev.File, prev.Line)
			}
			e.later[fg.Name] = fg
		}
		stmts, frags = append(stmts, st...), append(frags, fr...)
	}
	for _, f := range frags {
		if f.SQL, err = e.expand(f.SQL, f.File, f.sqlLine); err != nil {
			return nil, err
		}
		e.defined[f.Name] = &f
	}
	set := &Set{byName: map[string]Statement{}}
	for _, st := range stmts {
		if prev, ok := set.byName[st.Name]; ok {
			return nil, fmt.Errorf("%s:%d: statement %s is defined again (first at %s:%d)", st.File, st.Line, st.Name, prev.File, prev.Line)
		}
		if st.SQL, err = e.expand(st.SQL, st.File, st.sqlLine); err != nil {
			return nil, err
		}
		set.byName[st.Name] = st
		set.names = append(set.names, st.Name)
	}
	for _, f := range frags {
		if !e.used[f.Name] {
			return nil, fmt.Errorf("%s:%d: fragment %s is defined but nothing uses it", f.File, f.Line, f.Name)
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
