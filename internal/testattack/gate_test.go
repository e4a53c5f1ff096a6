package testattack

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestGateRowCounts: a row counts its tries and bad tries by protocol, in
// the order tried, and says so in one figure.
func TestGateRowCounts(t *testing.T) {
	t.Parallel()
	type try struct {
		proto, answer string
		bad           bool
	}
	for _, tt := range []struct {
		name    string
		tries   []try
		verdict string
		answers string
		protos  []string
	}{
		{"none", nil, "not tried", "", nil},
		{"all through", []try{{"h1", "200", true}, {"h2", "200", true}, {"h3", "200", true}},
			"3/3 (h1, h2, h3)", "h1 200 ×1, h2 200 ×1, h3 200 ×1", []string{"h1", "h2", "h3"}},
		{"some", []try{{"h2", "401", false}, {"h1", "200", true}, {"h2", "200", true}, {"h1", "200", true}},
			"3/4 (h1, h2)", "h1 200 ×2, h2 200 ×1, h2 401 ×1", []string{"h2", "h1"}},
		{"held", []try{{"h1", "401", false}, {"h2", "401", false}}, "0/2", "h1 401 ×1, h2 401 ×1", []string{"h1", "h2"}},
		{"one protocol", []try{{"h2", "200", true}}, "1/1", "h2 200 ×1", []string{"h2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out GateOutcome
			r := out.Attack("/ADMIN/", "401")
			for _, x := range tt.tries {
				r.Add(x.proto, x.answer, x.bad)
			}
			c := r.Counts()
			if got := c.Verdict(); got != tt.verdict {
				t.Errorf("Verdict() = %q, want %q", got, tt.verdict)
			}
			if c.Answers != tt.answers {
				t.Errorf("Answers = %q, want %q", c.Answers, tt.answers)
			}
			if !slices.Equal(c.Protos, tt.protos) || c.Tries != len(tt.tries) {
				t.Errorf("protocols %v, %d tries; want %v, %d", c.Protos, c.Tries, tt.protos, len(tt.tries))
			}
			if rows := out.Rows(); len(rows) != 1 || rows[0] != r || r.Honest {
				t.Errorf("rows %v", rows)
			}
		})
	}
}

// TestOffsite: a Location goes elsewhere when a browser, reading it as the
// URL standard says, leaves the site's host.
func TestOffsite(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		loc  string
		away bool
	}{
		{"https://localhost:8443/x?q=1", false},
		{"https://LOCALHOST/", false},
		{"/admin/", false},
		{"admin/", false},
		{"http://localhost:8443/", false},
		{"https://localhost:8443@evil.example/", true},
		{"https://localhost:84438443@evil.example", true},
		{"https://evil.example/", true},
		{"//evil.example/", true},
		{"/\\evil.example/", true},
		{"\\\\evil.example", true},
		{" /\t/evil.example/", true},
		{"https://user@localhost/", true},
		{"javascript:alert(1)", true},
		{"https://localhost/%zz", false}, // unparsable: not counted as elsewhere
	} {
		if got, how := offsite(tt.loc, "localhost"); got != tt.away {
			t.Errorf("offsite(%q) = %t (%s), want %t", tt.loc, got, how, tt.away)
		}
	}
}

// challengeBody is a challenge page as the edge writes one: a proof of
// work of k puzzles of b bits, and a wait when wait is set.
func challengeBody(seed string, k, b int, wait bool) string {
	s := `<script data-seed="` + seed + `" data-k="` + strconv.Itoa(k) + `" data-bits="` + strconv.Itoa(b) +
		`" data-pass="/.maat/pass?t=POW&amp;r=%2Fgate%2Fx"`
	if wait {
		s = `<noscript><meta http-equiv="refresh" content="3; url=/.maat/pass?t=WAIT&amp;r=%2Fgate%2Fx"></noscript>` + s +
			` data-wait="/.maat/pass?t=WAIT&amp;r=%2Fgate%2Fx" data-wait-ms="3250"`
	}
	return s + `></script>`
}

// TestParseChallengeAndSolve: the page's puzzle is read and solved as the
// edge checks it (nonce i carries i in its top byte; SHA-256(seed ‖ nonce)
// has the bits' leading zeros), and an attacker here spends no more than
// it says.
func TestParseChallengeAndSolve(t *testing.T) {
	t.Parallel()
	seed := strings.Repeat("ab", 32)
	p := parseChallenge(challengeBody(seed, 4, 8, true))
	if p.seed != seed || p.k != 4 || p.bits != 8 || p.total() != 10 {
		t.Fatalf("parsed %+v; total %d bits", p, p.total())
	}
	if p.pass != "/.maat/pass?t=POW&r=%2Fgate%2Fx" || p.wait != "/.maat/pass?t=WAIT&r=%2Fgate%2Fx" || p.waitSecs != 3 {
		t.Fatalf("pass %q, wait %q (%d s)", p.pass, p.wait, p.waitSecs)
	}
	if got := p.describe(403); got != "403, 10 bits, wait" {
		t.Errorf("describe = %q", got)
	}
	n, err := p.solve(context.Background(), 12)
	if err != nil {
		t.Fatal(err)
	}
	nonces := strings.Split(n, ",")
	if len(nonces) != 4 {
		t.Fatalf("%d nonces: %q", len(nonces), n)
	}
	for i, s := range nonces {
		v, err := strconv.ParseUint(s, 16, 64)
		if err != nil || int(v>>56) != i {
			t.Fatalf("nonce %d = %q", i, s)
		}
		var msg [72]byte
		copy(msg[:64], seed)
		binary.BigEndian.PutUint64(msg[64:], v)
		sum := sha256.Sum256(msg[:])
		if lz := bits.LeadingZeros64(binary.BigEndian.Uint64(sum[:8])); lz < 8 {
			t.Errorf("nonce %d: %d leading zero bits, want 8", i, lz)
		}
	}
	if _, err := p.solve(context.Background(), 9); err == nil {
		t.Error("solved 10 bits where 9 are spent at most")
	}
	if noWait := parseChallenge(challengeBody(seed, 1, 16, false)); noWait.wait != "" || noWait.describe(403) != "403, 16 bits, no wait" {
		t.Errorf("a page without the wait: %+v", noWait)
	}
	if none := parseChallenge("<p>ok</p>"); none.pass != "" || none.wait != "" || none.total() != 0 {
		t.Errorf("a page without a challenge: %+v", none)
	}
}

func TestWithReturn(t *testing.T) {
	t.Parallel()
	got, err := withReturn("/.maat/pass?t=TOK&r=%2Fgate%2Fx", "//evil.example/")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(got)
	if u.Path != "/.maat/pass" || u.Query().Get("t") != "TOK" || u.Query().Get("r") != "//evil.example/" {
		t.Errorf("withReturn = %q", got)
	}
}

func TestPseudoFields(t *testing.T) {
	t.Parallel()
	names := func(order string) string {
		var out []string
		for _, f := range pseudoFields(order, "GET", "localhost", "/") {
			out = append(out, f[0])
		}
		return strings.Join(out, ",")
	}
	if got := names(ChromeH2.Pseudo); got != ":method,:authority,:scheme,:path" {
		t.Errorf("Chrome's order: %s", got)
	}
	if got := names(GoH2.Pseudo); got != ":authority,:method,:path,:scheme" {
		t.Errorf("Go's order: %s", got)
	}
}

// TestFindFPLine: the line of a path is the last whose path field is
// that path exactly, and its fields read as strings.
func TestFindFPLine(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "fp.jsonl")
	lines := `{"path":"/gate/xff/1/h1","remote_ip":"127.0.0.1"}
{"path":"/gate/xff/1/h10","remote_ip":"10.0.0.1"}
not json /gate/xff/1/h1
{"path":"/gate/xff/1/h1","remote_ip":"1.2.3.4","rules":["a","b"],"weight":12,"challenge":{"alg":"fast","bits":12}}
`
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	l := findFPLine(file, "/gate/xff/1/h1")
	if l.Str("remote_ip") != "1.2.3.4" || l.Str("rules") != "a,b" || l.Str("weight") != "12" ||
		l.Str("challenge") != `{"alg":"fast","bits":12}` || l.Str("absent") != "" {
		t.Errorf("line %v", l)
	}
	if findFPLine(file, "/gate/none") != nil || findFPLine(filepath.Join(t.TempDir(), "none"), "/x") != nil {
		t.Error("found a line that is not there")
	}
	ref := FPLine{"client_family": "chrome", "rules": []any{"browser"}, "weight": 0.0}
	other := FPLine{"client_family": "chrome", "rules": []any{"browser", "parrot"}, "weight": 30.0}
	if d := differing(ref, other); !slices.Equal(d, []string{"rules", "weight"}) {
		t.Errorf("differing = %v", d)
	}
	if d := differing(ref, ref); len(d) != 0 {
		t.Errorf("a line differs from itself in %v", d)
	}
}

// TestUpstreamRecords: once asked, the upstream keeps what the next
// requests were, up to its bound, here and through its StatsHandler.
func TestUpstreamRecords(t *testing.T) {
	t.Parallel()
	u, err := NewUpstream(1 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	stats := httptest.NewServer(u.StatsHandler())
	defer stats.Close()
	remote := RemoteUpstream(u.URL, stats.URL+"/", u.BigSize)
	get := func(path string) {
		req, _ := http.NewRequest("GET", u.URL+path, nil)
		req.Header.Set(gateTryHeader, path)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	get("/before")
	if s := u.Seen(); len(s) != 0 {
		t.Fatalf("kept %v before Record", s)
	}
	remote.Record(2)
	for _, p := range []string{"/a;x/", "/b?q=1", "/c"} {
		get(p)
	}
	for name, seen := range map[string][]Seen{"here": u.Seen(), "remote": remote.Seen()} {
		if len(seen) != 2 || seen[0].Target != "/a;x/" || seen[1].Target != "/b?q=1" ||
			seen[0].Method != "GET" || seen[1].Header.Get(gateTryHeader) != "/b?q=1" {
			t.Errorf("%s: seen %+v", name, seen)
		}
	}
	if !(Target{Upstream: u}).reached("/b?q=1") || (Target{Upstream: u}).reached("/c") {
		t.Error("reached says otherwise than Seen")
	}
}

// TestGateSources: the gate attackers' blocks are apart from the other
// attacks' and from the honest client, and only the forwarded case's
// proxy is a trusted proxy.
func TestGateSources(t *testing.T) {
	t.Parallel()
	trusted := netip.MustParsePrefix(GateTrustedProxies)
	for block := blockGatePaths; block <= blockGateResume; block++ {
		if block <= blockIdleH1 {
			t.Fatalf("gate block %d among the resource attacks' (up to %d)", block, blockIdleH1)
		}
		for _, k := range []int{0, 1, 249, 250, 300} {
			ip, _ := netip.AddrFromSlice(source(block, k).To4())
			if ip == netip.MustParseAddr("127.0.0.1") || !ip.IsLoopback() {
				t.Fatalf("source(%d, %d) = %v", block, k, ip)
			}
			if trusted.Contains(ip) != (block == blockGateProxy) {
				t.Errorf("source(%d, %d) = %v: trusted %t", block, k, ip, trusted.Contains(ip))
			}
		}
	}
}
