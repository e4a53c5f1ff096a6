package edge

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// reasonArg is, for each function that answers with a reason, the index of
// its reason argument.
var reasonArg = map[string]int{"plainError": 3, "clientError": 4, "limited": 2, "errorPage": 3}

// TestReasons holds the reasons to their contract: each constant of
// reasons.go is one snake_case word with a text of its own, documented in
// docs/fingerprints.md, and every call that answers with a reason passes
// one of the constants (or a variable holding one), never a literal.
func TestReasons(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	consts := map[string]string{} // name → value
	var parsed []*ast.File
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
		if name != "reasons.go" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Values) == len(vs.Names) {
				for i, id := range vs.Names {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && strings.HasPrefix(id.Name, "reason") {
						consts[id.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
			return true
		})
	}
	if len(consts) < 15 {
		t.Fatalf("found %d reason constants in reasons.go; the scan is broken", len(consts))
	}
	docs, err := os.ReadFile(filepath.Join("..", "docs", "fingerprints.md"))
	if err != nil {
		t.Fatal(err)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	seen := map[string]string{}
	for name, v := range consts {
		if !snake.MatchString(v) {
			t.Errorf("%s = %q is not snake_case", name, v)
		}
		if other, ok := seen[v]; ok {
			t.Errorf("%s and %s are both %q: one cause, one constant", name, other, v)
		}
		seen[v] = name
		if reasonTexts[v] == "" {
			t.Errorf("%s (%q) has no text in reasonTexts", name, v)
		}
		if !strings.Contains(string(docs), "`"+v+"`") {
			t.Errorf("docs/fingerprints.md does not list the reason %q", v)
		}
	}
	if len(reasonTexts) != len(consts) {
		t.Errorf("reasonTexts has %d entries for %d constants", len(reasonTexts), len(consts))
	}

	calls := 0
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var fn string
			switch e := call.Fun.(type) {
			case *ast.Ident:
				fn = e.Name
			case *ast.SelectorExpr:
				fn = e.Sel.Name
			}
			i, ok := reasonArg[fn]
			if !ok || len(call.Args) <= i {
				return true
			}
			calls++
			pos := fset.Position(call.Pos())
			switch a := call.Args[i].(type) {
			case *ast.BasicLit:
				t.Errorf("%s: %s answers with the literal %s; use a constant of reasons.go", pos, fn, a.Value)
			case *ast.Ident:
				if strings.HasPrefix(a.Name, "reason") && a.Name != "reason" && consts[a.Name] == "" {
					t.Errorf("%s: %s answers with %s, which reasons.go does not define", pos, fn, a.Name)
				}
			}
			return true
		})
	}
	if calls < 10 {
		t.Errorf("found %d calls that answer with a reason; the scan is broken", calls)
	}
}

// TestPlainErrorLogsReason: the plain error page names the reason and the
// request's ID, and the request's log line carries the reason.
func TestPlainErrorLogsReason(t *testing.T) {
	t.Parallel()
	st := &reqState{id: "r-1"}
	w := httptest.NewRecorder()
	plainError(w, st, 421, reasonUnknownSite)
	if st.reason != reasonUnknownSite {
		t.Errorf("reason = %q; want %q", st.reason, reasonUnknownSite)
	}
	body := w.Body.String()
	for _, want := range []string{"421 Misdirected Request", reasonTexts[reasonUnknownSite], "reason: unknown_site", "request id: r-1"} {
		if !strings.Contains(body, want) {
			t.Errorf("page %q lacks %q", body, want)
		}
	}
}
