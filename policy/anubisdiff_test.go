package policy

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The differential test against Anubis: testdata/anubisdiff holds the
// decisions Anubis v1.27.0's own server took for every request of the
// corpus (anubisdiff_corpus_test.go) under every policy file of its tree
// and every snippet of its data/ imported alone, recorded by
// testdata/anubisdiff/record.sh from a real run of Anubis built from its
// module; Maat decides the same requests under the same files here. The
// figures, and every remaining difference with its reason, are in
// docs/policy.md ("Decisions compared with Anubis").

var diffVerbose = flag.Bool("anubisdiff.v", false, "print every difference of TestAnubisDifferential")

const anubisGolden = "testdata/anubisdiff/anubis-v1.27.0.txt"

// goldenSource is one policy of the recorded run.
type goldenSource struct {
	file, wraps string // a policy file of the tree, or a snippet imported alone
	cwd         string
	refused     string   // Anubis's error; "" when it loaded the policy
	rules       []string // the rule names decisions refer to
	decisions   []string
}

func (s *goldenSource) name() string {
	if s.wraps != "" {
		return "import " + s.wraps
	}
	return s.file
}

func readGolden(t *testing.T) []*goldenSource {
	t.Helper()
	f, err := os.Open(anubisGolden)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*goldenSource
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var cur *goldenSource
	for sc.Scan() {
		key, val, _ := strings.Cut(sc.Text(), " ")
		switch key {
		case "#":
		case "file":
			cur = &goldenSource{file: val}
			out = append(out, cur)
		case "import":
			cur = &goldenSource{wraps: val}
			out = append(out, cur)
		case "cwd":
			cur.cwd = val
		case "refused":
			cur.refused = val
		case "rules": // separated by tabs: names may hold spaces
			cur.rules = strings.Split(val, "\t")
		default:
			cur.decisions = strings.Fields(sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// anubisDecision is a recorded decision: action A (ALLOW), D (DENY), C
// (CHALLENGE) or E (a rule failed to evaluate and Anubis answered 500),
// the rule, and a challenge's algorithm and difficulty.
type anubisDecision struct {
	action, rule, alg string
	difficulty        int
}

func parseAnubisDecision(code string, rules []string) anubisDecision {
	d := anubisDecision{action: code[:1]}
	rest := code[1:]
	idx, chal, _ := strings.Cut(rest, ":")
	if i, err := strconv.Atoi(idx); err == nil && i < len(rules) {
		d.rule = rules[i]
	}
	if alg, diff, ok := strings.Cut(chal, ":"); ok {
		d.alg = alg
		d.difficulty, _ = strconv.Atoi(diff)
	}
	return d
}

// String writes a decision for people: "CHALLENGE fast/4", "DENY".
func (d anubisDecision) String() string {
	names := map[string]string{"A": "ALLOW", "D": "DENY", "C": "CHALLENGE", "E": "ERROR", "R": "REFUSED"}
	s := names[d.action]
	if d.action == "C" {
		s += fmt.Sprintf(" %s/%d", d.alg, d.difficulty)
	}
	return s
}

// equalDecision: the same action, and for a challenge the same kind (fast,
// slow and preact are Maat's proof of work; metarefresh its wait) and
// difficulty (Maat's bits are 4·difficulty).
func (d anubisDecision) equalDecision(m anubisDecision) bool {
	if d.action != m.action {
		return false
	}
	if d.action != "C" {
		return true
	}
	kind := func(alg string) string {
		if alg == "metarefresh" {
			return alg
		}
		return "pow"
	}
	return kind(d.alg) == kind(m.alg) && d.difficulty == m.difficulty
}

// maatDecision writes Maat's decision as the recorder writes Anubis's.
func maatDecision(p *Policy, d *Decision) anubisDecision {
	var out anubisDecision
	switch d.Action {
	case ALLOW:
		out.action = "A"
	case DENY:
		out.action = "D"
	case CHALLENGE:
		out.action = "C"
		out.alg = d.Challenge.Algorithm
		out.difficulty = d.Challenge.Bits / bitsPerDifficulty
		if d.Challenge.Bits%bitsPerDifficulty != 0 {
			out.difficulty = -d.Challenge.Bits
		}
	default:
		out.action = d.Action.String()
	}
	isRule := false
	for _, r := range p.rules {
		if r.name == d.Rule && r.id == d.RuleID {
			isRule = true
		}
	}
	switch {
	case d.Rule == "":
		out.rule = "default/allow"
	case isRule:
		out.rule = "bot/" + d.Rule
	default:
		out.rule = "threshold/" + d.Rule
	}
	return out
}

// diffRequestToPolicy builds what the edge would give the policy for a
// request of the corpus, without fingerprints (Anubis has none).
func diffRequestToPolicy(cr diffRequest) *Request {
	target := cr.Target
	path, query, _ := strings.Cut(target, "?")
	r := &Request{
		RemoteAddr: netip.MustParseAddr(cr.IP),
		Host:       "example.org",
		Method:     cr.Method,
		Path:       path,
		RawQuery:   query,
		Proto:      "HTTP/2.0",
		TLS:        true,
		Header:     http.Header{},
	}
	for _, kv := range cr.Headers {
		r.Header.Add(kv[0], kv[1])
	}
	return r
}

// fcrdnsFrom answers forward-confirmed reverse DNS from the corpus's
// table, as Verifier.FCrDNS answers it from DNS.
func fcrdnsFrom(table diffDNS, addr netip.Addr) FCrDNS {
	f := FCrDNS{Checked: true}
	for _, n := range table.Reverse[addr.String()] {
		name := strings.TrimSuffix(n, ".")
		f.Names = append(f.Names, name)
		if slices.Contains(table.Forward[name], addr.String()) {
			f.Confirmed = true
		}
	}
	return f
}

// diffOptions reads a policy file of the recorded tree; a relative import
// is read from the working directory the recorder ran it in.
func diffOptions(cwd string) Options {
	tree := filepath.Join("testdata", "anubisdiff", "tree")
	return Options{ReadFile: func(name string) ([]byte, error) {
		if !filepath.IsAbs(name) && !strings.HasPrefix(filepath.ToSlash(name), "testdata/anubisdiff/tree/") {
			data, err := os.ReadFile(filepath.Join(tree, cwd, name))
			if !errors.Is(err, fs.ErrNotExist) {
				return data, err
			}
		}
		return os.ReadFile(name)
	}}
}

// loadDiffSource loads a policy of the recorded run with Maat.
func loadDiffSource(s *goldenSource) (*Policy, error) {
	opts := diffOptions(s.cwd)
	if s.wraps != "" {
		return Parse("policy.yaml", []byte("bots:\n  - import: "+s.wraps+"\n"), opts)
	}
	return Load(filepath.Join("testdata", "anubisdiff", "tree", s.file), opts)
}

// diffFigures are the results of one policy.
type diffFigures struct {
	name          string
	total, equal  int
	sameRule      int
	refusedByMaat error
	diffs         map[string]int // "anubis → maat: request" → count
	ruleDiffs     map[string]int // the same decision by another rule
}

// runDifferential decides the corpus under every policy Anubis loaded.
func runDifferential(t *testing.T) (figs []*diffFigures, refusals []string) {
	t.Helper()
	corpus := diffCorpus()
	table := diffDNSTable()
	for _, s := range readGolden(t) {
		p, err := loadDiffSource(s)
		if s.refused != "" {
			if err == nil {
				refusals = append(refusals, s.name()+": Anubis refuses it ("+s.refused+"), Maat loads it")
			}
			continue
		}
		if len(s.decisions) != len(corpus) {
			t.Fatalf("%s: %d decisions for %d requests: record again", s.name(), len(s.decisions), len(corpus))
		}
		f := &diffFigures{name: s.name(), total: len(corpus), diffs: map[string]int{}, ruleDiffs: map[string]int{}, refusedByMaat: err}
		figs = append(figs, f)
		if err != nil {
			f.diffs["refused by Maat: "+err.Error()] = len(corpus)
			continue
		}
		for i, cr := range corpus {
			want := parseAnubisDecision(s.decisions[i], s.rules)
			r := diffRequestToPolicy(cr)
			d := p.Evaluate(r)
			if d.NeedFCrDNS {
				r.FCrDNS = fcrdnsFrom(table, r.RemoteAddr)
				d = p.Evaluate(r)
			}
			got := maatDecision(p, &d)
			if want.equalDecision(got) {
				f.equal++
				if want.rule == got.rule || want.rule == "threshold" && strings.HasPrefix(got.rule, "threshold/") {
					f.sameRule++
				} else {
					f.ruleDiffs[fmt.Sprintf("same decision %s, Anubis's rule %s, Maat's %s: %s %s %s from %s", want, want.rule, got.rule, cr.Name, cr.Method, cr.Target, cr.IP)]++
				}
				continue
			}
			key := fmt.Sprintf("Anubis %s (%s), Maat %s (%s): %s %s %s from %s", want, want.rule, got, got.rule, cr.Name, cr.Method, cr.Target, cr.IP)
			f.diffs[key]++
		}
	}
	return figs, refusals
}

// TestAnubisDifferential: Maat decides as Anubis v1.27.0 does for at least
// 99% of the requests under all policies together and under Anubis's
// default policy, and refuses every policy Anubis refuses. With -v it
// prints the figures of each policy; with -anubisdiff.v every difference.
func TestAnubisDifferential(t *testing.T) {
	t.Parallel()
	figs, refusals := runDifferential(t)
	for _, r := range refusals {
		if !strings.Contains(r, "docs/manifest/cfg/anubis/botPolicies.yaml") { // see anubisDiffKnown
			t.Errorf("%s", r)
		}
	}
	var total, equal, sameRule int
	for _, f := range figs {
		total += f.total
		equal += f.equal
		sameRule += f.sameRule
		t.Logf("%-70s %4d/%d %6.2f%%", f.name, f.equal, f.total, 100*float64(f.equal)/float64(f.total))
		if *diffVerbose {
			for _, m := range []map[string]int{f.diffs, f.ruleDiffs} {
				keys := make([]string, 0, len(m))
				for k := range m {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				for _, k := range keys {
					t.Logf("    %d× %s", m[k], k)
				}
			}
		}
		if f.name == "data/botPolicies.yaml" && f.equal*100 < 99*f.total {
			t.Errorf("Anubis's default policy: %d of %d decisions equal, want 99%%", f.equal, f.total)
		}
	}
	t.Logf("overall: %d of %d decisions equal (%.2f%%) under %d policies; the same rule or threshold decided in %d (%.2f%%)",
		equal, total, 100*float64(equal)/float64(total), len(figs), sameRule, 100*float64(sameRule)/float64(total))
	if equal*100 < 99*total {
		t.Errorf("overall: %d of %d decisions equal, want 99%%", equal, total)
	}
}
