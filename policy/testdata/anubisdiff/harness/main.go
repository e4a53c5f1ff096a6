// Command maatdiff records Anubis's decisions for the differential test of
// Maat's policy (policy/anubisdiff_test.go). record.sh copies it into a
// copy of the Anubis module (as cmd/maatdiff) and runs it there: it lives
// under testdata so that Maat's own build never compiles it.
//
// For every policy file of Anubis's tree that Anubis loads, and for each
// of its policy snippets imported alone, it builds Anubis's server as
// cmd/anubis does (lib.New behind the same X-Real-Ip middleware) and sends
// it every request of the corpus, from the address the request names
// (X-Real-Ip, as a reverse proxy in front of Anubis sets it), with DNS
// answered from the corpus's table. What the server does is the decision:
// the request reaches the upstream (ALLOW, with Anubis's X-Anubis-Rule),
// a challenge page (CHALLENGE, with the algorithm and difficulty of its
// anubis_challenge script), an error page (ERROR: a rule failed to
// evaluate), or the deny page (DENY).
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/TecharoHQ/anubis"
	"github.com/TecharoHQ/anubis/internal"
	"github.com/TecharoHQ/anubis/internal/dns"
	libanubis "github.com/TecharoHQ/anubis/lib"
)

type request struct {
	Name    string      `json:"name"`
	Method  string      `json:"method"`
	Target  string      `json:"target"`
	IP      string      `json:"ip"`
	Headers [][2]string `json:"headers"`
}

type dnsTable struct {
	Reverse map[string][]string `json:"reverse"`
	Forward map[string][]string `json:"forward"`
}

// source is one policy to run: a file of the tree, or a snippet imported
// alone by a policy of one line.
type source struct {
	file   string // the policy file, relative to the module root
	wraps  string // the snippet a one-line policy imports; "" for a file
	cwd    string // the working directory relative imports resolve from
	policy string // the path given to Anubis
}

func main() {
	root := flag.String("root", ".", "the copy of the Anubis module")
	corpusPath := flag.String("corpus", "", "corpus.json")
	dnsPath := flag.String("dns", "", "dns.json")
	out := flag.String("out", "", "the decisions file to write")
	tree := flag.String("tree", "", "directory to copy the policy files (and what they import from the filesystem) into")
	flag.Parse()
	log.SetFlags(0)
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))

	var corpus []request
	readJSON(*corpusPath, &corpus)
	var table dnsTable
	readJSON(*dnsPath, &table)
	fakeDNS(table)
	anubis.ForcedLanguage = "en"

	absRoot, err := filepath.Abs(*root)
	check(err)
	srcs := sources(absRoot)
	var b strings.Builder
	fmt.Fprintf(&b, "# Anubis %s's decisions for %d requests (corpus.json) under %d policies; written by record.sh\n", version(absRoot), len(corpus), len(srcs))
	loaded := 0
	for _, s := range srcs {
		res, err := run(absRoot, s, corpus)
		if err != nil {
			err = errors.New(strings.ReplaceAll(strings.ReplaceAll(err.Error(), absRoot+"/", ""), os.TempDir()+"/", ""))
		}
		switch {
		case err != nil && s.wraps == "":
			fmt.Fprintf(&b, "file %s\nrefused %s\n", s.file, oneLine(err))
			continue
		case err != nil:
			fmt.Fprintf(&b, "import %s\nrefused %s\n", s.wraps, oneLine(err))
			continue
		case s.wraps != "":
			fmt.Fprintf(&b, "import %s\ncwd %s\n", s.wraps, s.cwd)
			if rel, ok := strings.CutPrefix(s.wraps, "./"); ok {
				copyFile(absRoot, *tree, rel)
			}
		default:
			fmt.Fprintf(&b, "file %s\ncwd %s\n", s.file, s.cwd)
			copyFile(absRoot, *tree, s.file)
		}
		loaded++
		fmt.Fprintf(&b, "rules %s\n%s\n", strings.Join(res.rules, "\t"), strings.Join(res.decisions, " "))
	}
	// What policy files import from the filesystem, relative to the
	// working directory Anubis resolves them from.
	copyFile(absRoot, *tree, "lib/config/testdata/hack-test.json")
	copyFile(absRoot, *tree, "lib/config/testdata/hack-test.yaml")
	check(os.WriteFile(*out, []byte(b.String()), 0o644))
	log.Printf("maatdiff: %d sources, %d loaded, %d requests each", len(srcs), loaded, len(corpus))
}

// sources lists the policies to run: every YAML or JSON file of the tree
// that mentions bots (Anubis decides which of them are policies), Anubis's
// default policy, and every snippet of data/ and of robots2policy's test
// data imported alone.
func sources(root string) []source {
	var out []source
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch rel {
			case "node_modules", ".git", "web/static", "cmd/maatdiff":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(p) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(rel, "data/") && rel != "data/botPolicies.yaml":
			out = append(out, source{wraps: "(data)/" + strings.TrimPrefix(rel, "data/"), cwd: "."})
		case strings.HasPrefix(rel, "cmd/robots2policy/testdata/"):
			out = append(out, source{wraps: "./" + rel, cwd: "."})
		case topLevelBots.Match(data):
			out = append(out, source{file: rel, cwd: cwdOf(rel)})
		}
		return nil
	})
	check(err)
	sort.Slice(out, func(i, j int) bool { return out[i].file+out[i].wraps < out[j].file+out[j].wraps })
	return out
}

// cwdOf is the directory a file's relative imports resolve from: Anubis's
// tests run in the package that holds the testdata directory.
func cwdOf(rel string) string {
	if i := strings.Index(rel, "/testdata/"); i >= 0 {
		return rel[:i]
	}
	return "."
}

type result struct {
	rules     []string
	decisions []string
}

func run(root string, s source, corpus []request) (result, error) {
	check(os.Chdir(filepath.Join(root, s.cwd)))
	path := filepath.Join(root, s.file)
	if s.wraps != "" {
		f, err := os.CreateTemp("", "maatdiff-*.yaml")
		check(err)
		fmt.Fprintf(f, "bots:\n  - import: %s\n", s.wraps)
		check(f.Close())
		defer os.Remove(f.Name())
		path = f.Name()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pol, err := libanubis.LoadPoliciesOrDefault(ctx, path, anubis.DefaultDifficulty, "ERROR", false)
	if err != nil {
		return result{}, err
	}
	pol.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Maatdiff-Rule", r.Header.Get("X-Anubis-Rule"))
		w.WriteHeader(299)
	})
	srv, err := libanubis.New(libanubis.Options{
		Next: upstream, Policy: pol, Target: "http://127.0.0.1:1",
		CookieSecure: true, CookieSameSite: http.SameSiteNoneMode, CookiePartitioned: true,
		JWTRestrictionHeader: "X-Real-IP", Logger: pol.Logger,
	})
	if err != nil {
		return result{}, err
	}
	// cmd/anubis's middleware, with its default flags.
	var h http.Handler = srv
	h = internal.CustomRealIPHeader("", h)
	h = internal.RemoteXRealIP(false, "tcp", h)
	h = internal.XForwardedForToXRealIP(h)
	h = internal.XForwardedForUpdate(true, h)

	names := map[string]string{} // rule hash → name
	for _, b := range pol.Bots {
		names[b.Hash()] = "bot/" + b.Name
	}
	var res result
	ruleIndex := map[string]int{}
	idx := func(rule string) int {
		i, ok := ruleIndex[rule]
		if !ok {
			i = len(res.rules)
			ruleIndex[rule] = i
			res.rules = append(res.rules, rule)
		}
		return i
	}
	for _, cr := range corpus {
		d := decide(h, cr, names)
		code := d.action
		if d.rule != "" {
			code += fmt.Sprint(idx(d.rule))
		}
		if d.action == "C" {
			code += ":" + d.alg + ":" + fmt.Sprint(d.difficulty)
		}
		res.decisions = append(res.decisions, code)
	}
	return res, nil
}

type decision struct {
	action     string // A, D, C, E
	rule       string
	alg        string
	difficulty int
}

// topLevelBots finds the bots: key of a policy file, YAML or JSON.
var topLevelBots = regexp.MustCompile(`(?m)^(bots|\s*"bots")\s*:`)

var challengeScript = regexp.MustCompile(`(?s)<script id="anubis_challenge" type="application/json">(.*?)</script>`)

// decide sends cr to h and reads what Anubis did. Anubis answers a
// challenge to a client without gzip with an error page one time in 64
// (lib/http.go RenderIndex); such answers are asked again.
func decide(h http.Handler, cr request, names map[string]string) decision {
	for try := 0; ; try++ {
		r := httptest.NewRequest(cr.Method, "http://example.org"+cr.Target, nil)
		r.RemoteAddr = "127.0.0.1:40000" // the reverse proxy in front
		for _, kv := range cr.Headers {
			r.Header.Add(kv[0], kv[1])
		}
		r.Header.Set("X-Real-Ip", cr.IP)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		res := w.Result()
		body, _ := io.ReadAll(res.Body)
		if res.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			check(err)
			body, err = io.ReadAll(zr)
			check(err)
		}
		switch {
		case res.StatusCode == 299:
			return decision{action: "A", rule: res.Header.Get("X-Maatdiff-Rule")}
		case challengeOf(body) != nil:
			c := challengeOf(body)
			rule := names[c.Challenge.PolicyRuleHash]
			if rule == "" {
				rule = "threshold"
			}
			return decision{action: "C", rule: rule, alg: c.Rules.Algorithm, difficulty: c.Rules.Difficulty}
		case res.StatusCode == http.StatusInternalServerError && try < 12:
			continue
		case res.StatusCode == http.StatusInternalServerError:
			return decision{action: "E"}
		default:
			rule := "threshold"
			for hash, name := range names {
				if bytes.Contains(body, []byte(" "+hash)) {
					rule = name
				}
			}
			return decision{action: "D", rule: rule}
		}
	}
}

// challengeJSON is the anubis_challenge script of a challenge page; other
// pages carry it too, as null.
type challengeJSON struct {
	Rules *struct {
		Algorithm  string `json:"algorithm"`
		Difficulty int    `json:"difficulty"`
	} `json:"rules"`
	Challenge struct {
		PolicyRuleHash string `json:"policyRuleHash"`
	} `json:"challenge"`
}

// challengeOf reads the challenge of a challenge page, or nil.
func challengeOf(body []byte) *challengeJSON {
	m := challengeScript.FindSubmatch(body)
	if m == nil {
		return nil
	}
	var c *challengeJSON
	check(json.Unmarshal(m[1], &c))
	if c == nil || c.Rules == nil {
		return nil
	}
	return c
}

// fakeDNS answers Anubis's lookups from the table.
func fakeDNS(t dnsTable) {
	notFound := func(name string) error { return &net.DNSError{Err: "no such host", Name: name, IsNotFound: true} }
	dns.DNSLookupAddr = func(addr string) ([]string, error) {
		if names, ok := t.Reverse[addr]; ok {
			return slices.Clone(names), nil
		}
		return nil, notFound(addr)
	}
	dns.DNSLookupHost = func(host string) ([]string, error) {
		if addrs, ok := t.Forward[strings.TrimSuffix(host, ".")]; ok {
			return slices.Clone(addrs), nil
		}
		return nil, notFound(host)
	}
}

func version(root string) string {
	v, err := os.ReadFile(filepath.Join(root, "VERSION"))
	check(err)
	return "v" + strings.TrimSpace(string(v))
}

func copyFile(root, tree, rel string) {
	if tree == "" {
		return
	}
	data, err := os.ReadFile(filepath.Join(root, rel))
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	check(err)
	dst := filepath.Join(tree, rel)
	check(os.MkdirAll(filepath.Dir(dst), 0o755))
	check(os.WriteFile(dst, data, 0o644))
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

func readJSON(path string, v any) {
	data, err := os.ReadFile(path)
	check(err)
	check(json.Unmarshal(data, v))
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
