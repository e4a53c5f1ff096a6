package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/maatproxy/maat/cmd/edge/internal/ops"
)

// fpLines are two fingerprint log lines as the edge writes them: one of
// now, one of three days ago.
func fpLines(now time.Time) string {
	return fmt.Sprintf(`{"time":%q,"remote_ip":"203.0.113.5","asn":64500,"as_org":"Example Net","country":"NL","host":"a.test","method":"GET","path":"/new","proto":"HTTP/2.0","ja4":"t13d1516h2_8daaf6152771_02713d6af862","hfp":"h206_aaaaaaaaaaaa","hfp_r":":method,:authority,:scheme,:path,user-agent,accept","h2fp":"1:65536|0|0|m,a,s,p","user_agent":"curl/8.0","client_family":"curl","weight":0,"rules":["honest-clients"],"action":"ALLOW","status":200,"bytes":10,"duration_ms":1}
{"time":%q,"remote_ip":"203.0.113.9","host":"b.test","method":"POST","path":"/old","proto":"HTTP/1.1","user_agent":"x","rules":["a","b"],"action":"DENY","status":403}
`, now.UTC().Format(time.RFC3339Nano), now.Add(-72*time.Hour).UTC().Format(time.RFC3339Nano))
}

type topRow struct {
	Value   string           `json:"value"`
	Count   int64            `json:"count"`
	Actions map[string]int64 `json:"actions"`
}

func topJSON(t *testing.T, out string) map[string]int64 {
	t.Helper()
	var rows []topRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("not JSON rows: %v\n%s", err, out)
	}
	m := map[string]int64{}
	for _, r := range rows {
		m[r.Value] = r.Count
	}
	return m
}

// TestFPTop: every -by field of the log works, "-" reads standard input,
// -since 1d leaves out the old line, and flags may follow the files.
func TestFPTop(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := writeFile(t, dir, "fp.jsonl", fpLines(time.Now()))
	want := map[string]map[string]int64{
		"path":    {"/new": 1, "/old": 1},
		"status":  {"200": 1, "403": 1},
		"action":  {"ALLOW": 1, "DENY": 1},
		"rule":    {"honest-clients": 1, "a": 1, "b": 1},
		"asn":     {"64500": 1, "": 1},
		"country": {"NL": 1, "": 1},
		"as_org":  {"Example Net": 1, "": 1},
		"method":  {"GET": 1, "POST": 1},
		"host":    {"a.test": 1, "b.test": 1},
		"ip":      {"203.0.113.5": 1, "203.0.113.9": 1},
		"family":  {"curl": 1, "": 1},
	}
	for _, by := range ops.FPTopFields() {
		t.Run("by "+by, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := edgeRun(t, "", "fp", "top", log, "-by", by, "-json") // flags after the file
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			got := topJSON(t, out)
			var total int64
			for _, n := range got {
				total += n
			}
			if total < 2 {
				t.Errorf("-by %s counted %v, want both lines", by, got)
			}
			if w, ok := want[by]; ok && fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("-by %s: %v, want %v", by, got, w)
			}
		})
	}
	for _, tt := range []struct {
		name  string
		stdin string
		args  []string
		want  map[string]int64
	}{
		{"stdin", fpLines(time.Now()), []string{"fp", "top", "-by", "path", "-json", "-"}, map[string]int64{"/new": 1, "/old": 1}},
		{"since 1d", "", []string{"fp", "top", "-by", "path", "-since", "1d", "-json", log}, map[string]int64{"/new": 1}},
		{"since 4d", "", []string{"fp", "top", log, "-since", "4d", "-json", "-by", "path"}, map[string]int64{"/new": 1, "/old": 1}},
		{"n 1 after the file", "", []string{"fp", "top", "-by", "rule", log, "-n", "1", "-json"}, map[string]int64{"a": 1}},
		{"site", "", []string{"fp", "top", "-by", "path", "-site", "B.test", "-json", log}, map[string]int64{"/old": 1}},
		{"action", "", []string{"fp", "top", "-by", "path", "-action", "allow", "-json", log}, map[string]int64{"/new": 1}},
		{"site, action and since", "", []string{"fp", "top", "-by", "path", "-site", "b.test", "-action", "DENY", "-since", "1d", "-json", log}, map[string]int64{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := edgeRun(t, tt.stdin, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got := topJSON(t, out); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("%v, want %v", got, tt.want)
			}
		})
	}
}

// TestRobots2Policy: the file or standard input ("-", or nothing) is read,
// and -disallow-honest-clients reaches the converter.
func TestRobots2Policy(t *testing.T) {
	t.Parallel()
	robots := "User-agent: *\nDisallow: /private/\nCrawl-delay: 5\n"
	file := writeFile(t, t.TempDir(), "robots.txt", robots)
	fromFile, _, code := edgeRun(t, "", "robots2policy", file)
	if code != 0 || !strings.Contains(fromFile, "/private/") {
		t.Fatalf("exit %d, output:\n%s", code, fromFile)
	}
	for _, args := range [][]string{{"robots2policy"}, {"robots2policy", "-"}} {
		if out, _, code := edgeRun(t, robots, args...); code != 0 || out != fromFile {
			t.Errorf("%v from standard input: exit %d, differs from the file's:\n%s", args, code, out)
		}
	}
	strict, _, code := edgeRun(t, "", "robots2policy", file, "-disallow-honest-clients")
	if code != 0 || strict == fromFile {
		t.Errorf("-disallow-honest-clients after the file: exit %d, output unchanged", code)
	}
	// Both outputs are policies the edge loads.
	dir := t.TempDir()
	for name, p := range map[string]string{"lenient.yaml": fromFile, "strict.yaml": strict} {
		if out, errOut, code := edgeRun(t, "", "policy", "check", writeFile(t, dir, name, p)); code != 0 {
			t.Errorf("%s: exit %d %s %s", name, code, out, errOut)
		}
	}
}

const googlebotUA = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"

// TestPolicyExplainAlone: -policy FILE without a configuration, checks
// named, -no-dns said to skip, -from-log with flags that override it.
func TestPolicyExplainAlone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := writeFile(t, dir, "policy.yaml", "bots:\n  - name: no-admin\n    path_regex: ^/admin\n    action: DENY\n  - name: rest\n    path_regex: .*\n    action: ALLOW\n")
	line := strings.SplitN(fpLines(time.Now()), "\n", 2)[0]
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"policy alone", []string{"policy", "explain", "-policy", pol, "-path", "/admin/x"}, []string{"decision: DENY", "rule=no-admin"}},
		{"flags after nothing else", []string{"policy", "explain", "-path", "/ok", "-policy", pol}, []string{"decision: ALLOW", "rule=rest"}},
		{"crawler skipped offline", []string{"policy", "explain", "-policy", pol, "-ua", googlebotUA, "-no-dns"}, []string{"check crawler verification: SKIPPED"}},
		{"from log", []string{"policy", "explain", "-policy", pol, "-from-log", line}, []string{"decision: ALLOW", "rule=rest", "check geo: ran: AS64500 (Example Net), country NL"}},
		{"from log, path overridden", []string{"policy", "explain", "-from-log", line, "-policy", pol, "-path", "/admin"}, []string{"decision: DENY"}},
		{"default policy", []string{"policy", "explain", "-ua", "curl/8.5.0", "-no-dns"}, []string{"decision: ALLOW"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := edgeRun(t, "", tt.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	// -from-log - reads the line from standard input.
	out, errOut, code := edgeRun(t, line+"\n", "policy", "explain", "-policy", pol, "-from-log", "-")
	if code != 0 || !strings.Contains(out, "rule=rest") {
		t.Errorf("-from-log -: exit %d %s\n%s", code, errOut, out)
	}
}

// TestPolicyCheckAnubis: Anubis's own default policy, shipped as
// (data)/botPolicies.yaml, passes `edge policy check` unchanged, and the
// check says Maat's signals add no weight to it; the one import line turns
// them on, and the check says so.
func TestPolicyCheckAnubis(t *testing.T) {
	t.Parallel()
	const anubisDefault = "../../policy/anubisdata/data/botPolicies.yaml"
	dir := t.TempDir()
	withSignals := writeFile(t, dir, "signals.yaml", "bots:\n  - import: (builtin)/maat-signals.yaml\n  - import: (data)/meta/default-config.yaml\n")
	for _, tt := range []struct{ file, want string }{
		{anubisDefault, anubisDefault + ": ok; Maat's signals add no weight (no signals: section; `- import: (builtin)/maat-signals.yaml` under bots: switches them on)\n"},
		{withSignals, withSignals + ": ok; Maat's signals add weight (signals: at (builtin)/maat-signals.yaml:"},
	} {
		out, errOut, code := edgeRun(t, "", "policy", "check", tt.file)
		if code != 0 || !strings.HasPrefix(out, tt.want) {
			t.Errorf("policy check %s: exit %d\n%s%s\nwant %q", tt.file, code, out, errOut, tt.want)
		}
		checkPrefixes(t, errOut)
	}
}

// TestExplainID: edge explain -id finds a request in the current log or a
// rotated, gzipped one; says what the log says, the policy's explanation
// and what would have let it through; warns of corrupt lines and still
// finds the others; and says clearly when the ID, the log or the record
// is not there.
func TestExplainID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := writeFile(t, dir, "policy.yaml", "bots:\n  - name: no-admin\n    path_regex: ^/admin\n    action: DENY\n  - name: slow-down\n    path_regex: ^/busy\n    action: CHALLENGE\n  - name: rest\n    path_regex: .*\n    action: ALLOW\n")
	now := time.Now().UTC().Format(time.RFC3339Nano)
	rec := func(id, path, action string, rules string) string {
		return fmt.Sprintf(`{"time":%q,"request_id":%q,"remote_ip":"203.0.113.5","host":"a.test","method":"GET","path":%q,"proto":"HTTP/2.0","user_agent":"curl/8.0","weight":0,"rules":[%s],"action":%q,"status":403}`+"\n",
			now, id, path, rules, action)
	}
	log := writeFile(t, dir, "fp.jsonl", rec("cur-1", "/ok", "ALLOW", `"rest"`)+"{corrupt\n"+rec("cur-2", "/busy", "CHALLENGE", `"slow-down"`))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(rec("old-1", "/admin/x", "DENY", `"no-admin"`)))
	zw.Close()
	writeFile(t, dir, "fp-2026-12-01T00-00-00.000.jsonl.gz", gz.String())
	for _, tt := range []struct {
		name       string
		args       []string
		code       int
		want, warn []string
	}{
		{"deny in a rotated gzip", []string{"-id", "old-1"}, 0,
			[]string{"request old-1: " + filepath.Join(dir, "fp-2026-12-01T00-00-00.000.jsonl.gz") + ", line 1", "logged decision: DENY", "logged rules and signals: no-admin",
				"decision: DENY weight=0 rule=no-admin", "what would have let it through:", "the rule no-admin decided it"},
			[]string{"edge: warning: skipped 1 lines"}},
		{"challenge in the current file", []string{"-id", "cur-2"}, 0,
			[]string{"logged decision: CHALLENGE", "solving the challenge"}, []string{"skipped 1 lines"}},
		{"allowed", []string{"-id", "cur-1"}, 0, []string{"nothing: the policy lets it through"}, nil},
		{"unknown ID", []string{"-id", "nope-7"}, 1, nil, []string{`edge: request ID "nope-7" is not in ` + log + " or its 1 rotated files"}},
		{"not an ID", []string{"-id", `a"b`}, 1, nil, []string{"not a request ID"}},
		{"missing log", []string{"-log", filepath.Join(dir, "none.jsonl")}, 1, nil, []string{"edge: -log: fplog: no log file: " + filepath.Join(dir, "none.jsonl")}},
		{"no ID", []string{}, 2, nil, []string{"-id REQUEST_ID is required"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"explain", "-policy", pol}, tt.args...)
			if !slices.Contains(tt.args, "-log") {
				args = append(args, "-log", log)
			}
			if tt.name == "missing log" {
				args = append(args, "-id", "x")
			}
			out, errOut, code := edgeRun(t, "", args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d: %s\n%s", code, tt.code, errOut, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.warn {
				if !strings.Contains(errOut, w) {
					t.Errorf("standard error lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}
