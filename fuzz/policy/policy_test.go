// Package policyfuzz holds the fuzz targets for the parsers of package
// policy: the policy loader, CEL compilation and robots.txt conversion.
package policyfuzz

import (
	"errors"
	"io/fs"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maatproxy/maat/policy"
)

// maxInput bounds fuzz inputs; policy files are operators' files, but
// loading must stay bounded in time for any input of a sane size.
const maxInput = 64 << 10

// noFiles keeps the loader off the file system: imports fail cleanly.
func noFiles() policy.Options {
	return policy.Options{
		ReadFile: func(name string) ([]byte, error) {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		},
		Glob: func(string) ([]string, error) { return nil, nil },
	}
}

func seedFiles(f *testing.F, pattern string) {
	files, err := filepath.Glob(pattern)
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

func requests() []*policy.Request {
	chrome := "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
	return []*policy.Request{
		{RemoteAddr: netip.MustParseAddr("203.0.113.7"), Method: "GET", Path: "/", Proto: "HTTP/2.0", TLS: true,
			Header: http.Header{"User-Agent": {chrome}, "Accept": {"text/html"}, "Accept-Language": {"en"}, "Sec-Fetch-Mode": {"navigate"}, "Sec-Ch-Ua": {"x"}},
			JA4:    "t13d1516h2_8daaf6152771_02713d6af862", ClientFamily: "chrome"},
		{RemoteAddr: netip.MustParseAddr("::1"), Method: "POST", Path: "/api/x", RawQuery: "a=1&go-get=1", Proto: "HTTP/1.1", TLS: true,
			Header: http.Header{"User-Agent": {chrome}}, ClientFamily: "curl", CrawlerVerified: policy.CrawlerFailed, Pass: "p"},
		{Method: "GET", Path: "/feed.xml", Header: http.Header{}},
		{RemoteAddr: netip.MustParseAddr("198.51.100.1"), Method: "GET", Path: "/x", Proto: "HTTP/2.0", TLS: true,
			Header: http.Header{"User-Agent": {chrome}}, ClientFamily: "chrome", ASN: 16509, ASOrg: "AMAZON-02", Country: "US"},
		{RemoteAddr: netip.MustParseAddr("192.0.2.9"), Method: "GET", Path: "/search", Proto: "HTTP/2.0", TLS: true,
			Header: http.Header{"User-Agent": {chrome}}, Cluster: "c1", HFP: "h", H2FP: "s|1|0|m,a,s,p", ASN: 64496,
			Pressure: 0.9, Storm: true, Upstream: policy.UpstreamLoad{InUse: 8, Capacity: 8, Queue: 30, QueueWaitMs: 400, P50Ms: 90, P95Ms: 1200},
			Load: [3]float64{12, 8, 3}},
	}
}

// FuzzParse: the loader never panics; a policy that loads loads again with
// the same version; evaluating it never panics, decides one of the four
// actions, and Explain reports the same decision.
func FuzzParse(f *testing.F) {
	seedFiles(f, "../../policy/testdata/good/*.*")
	seedFiles(f, "../../policy/testdata/bad/*.yaml")
	seedFiles(f, "../../policy/lists/*.yaml")
	seedFiles(f, "../../policy/testdata/anubis/good/*")
	seedFiles(f, "../../policy/testdata/anubis/bad/*")
	f.Add(policy.DefaultPolicyYAML())
	f.Add([]byte(`{"bots":[{"name":"x","expression":{"all":["path == \"/\"","weight > 0"]},"action":"WEIGH"}]}`))
	f.Add([]byte("bots: [{name: r, path_regex: ., action: RATE, rate: {key: pass, per_second: 1, burst: 2}}]"))
	f.Add([]byte("bots: [{name: d, user_agent_regex: GPTBot, action: DIVERT, divert_to: tarpit}, {name: r, path_regex: ^/x, action: DENY_AND_REROUTE, reroute_to: 'https://example.org/'}, {name: g, asns: {match: [16509]}, geoip: {countries: [US]}, action: WEIGH}]\nthresholds: [{name: t, expression: weight >= 5, action: DIVERT, divert_to: maze}]\nstatus_codes: {CHALLENGE: 401, DENY: 451}\nhosting_asns: {add: [64500]}"))
	f.Add([]byte("bots: [{name: r, expression: 'pressure > 0.5 && upstream.queue > 1.0', action: RATE, rate: {key: cluster, per_second: 1}}]\nthresholds: [{name: c, expression: 'weight < 20 && !storm', action: ALLOW}, {name: t, expression: 'weight >= 0 || load_1m > 4.0', action: CHALLENGE, challenge: {algorithm: fast, bits: 12}}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxInput {
			return
		}
		p, err := policy.Parse("fuzz.yaml", data, noFiles())
		if err != nil {
			if !errors.Is(err, policy.ErrSyntax) && !errors.Is(err, policy.ErrInvalid) && !errors.Is(err, policy.ErrImport) {
				t.Fatalf("error of no known kind: %v", err)
			}
			if !strings.Contains(err.Error(), "fuzz.yaml") && !strings.Contains(err.Error(), "(builtin)/") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		q, err := policy.Parse("fuzz.yaml", data, noFiles())
		if err != nil || q.Version() != p.Version() {
			t.Fatalf("second load differs: %v, %q != %q", err, q.Version(), p.Version())
		}
		if c, d := p.StatusCodes(); c != 0 && (c < 100 || c > 599) || d != 0 && (d < 100 || d > 599) {
			t.Fatalf("status codes %d, %d", c, d)
		}
		if p.WaitMaxWeight() < 0 {
			t.Fatalf("WaitMaxWeight %d", p.WaitMaxWeight())
		}
		for _, dt := range p.DivertTargets() {
			if dt.Name == "" || !strings.Contains(dt.Source, "fuzz.yaml:") {
				t.Fatalf("divert target %+v", dt)
			}
		}
		for _, r := range requests() {
			d := p.Evaluate(r)
			if d.Action == policy.WEIGH || d.Action > policy.DIVERT {
				t.Fatalf("decision %v", d.Action)
			}
			if (d.Action == policy.DIVERT) != (d.DivertTo != "") || d.RerouteTo != "" && d.Action != policy.DENY {
				t.Fatalf("decision %v divert %q reroute %q", d.Action, d.DivertTo, d.RerouteTo)
			}
			if d.Action == policy.CHALLENGE && (d.Challenge.Bits < 1 || d.Challenge.Bits > 64) {
				t.Fatalf("challenge %+v", d.Challenge)
			}
			if d.Action == policy.RATE && (d.Rate.Key == "" || d.Rate.Rate <= 0 || d.Rate.Burst < 1) {
				t.Fatalf("rate %+v", d.Rate)
			}
			if !strings.Contains(p.Explain(r), "decision: "+d.Action.String()) {
				t.Fatalf("Explain disagrees with Evaluate (%s):\n%s", d.Action, p.Explain(r))
			}
		}
	})
}

// FuzzCompileExpression: CEL compilation never panics, refuses what is too
// long, and takes bounded time (the parser's size and recursion limits).
func FuzzCompileExpression(f *testing.F) {
	for _, s := range []string{
		`userAgent == ""`,
		`"Accept" in headers && headers["Accept"] == "application/json" && path.startsWith("/api/")`,
		`userAgent.matches("Chrome/[1-9][0-9]?\\.0\\.0\\.0") && missingHeader(headers, "Sec-Ch-Ua")`,
		`size(query) == 0 && size(segments(path)) < 2`,
		`randInt(16) >= 4`,
		`load_1m >= 10.0`,
		`ja4.startsWith("t13") || clientFamily == "curl" || proto == "HTTP/3.0"`,
		`"104.16.0.0" in lookupHost(headers["Host"])`,
		`((((((((((((((((((((((((((((((((((true))))))))))))))))))))))))))))))))))`,
		`[1,2,3].map(x, x * 2).exists(y, y > 4)`,
		`path + 1`,
		`pressure > 0.5 && storm && upstream.queue_wait_ms > 100.0 && cluster != ""`,
		`upstream.nope > 1.0`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		err := policy.CompileExpression(src)
		if len(src) > policy.MaxExpressionLen && err == nil {
			t.Fatalf("a %d-byte expression compiled", len(src))
		}
		if err != nil && !errors.Is(err, policy.ErrExpression) {
			t.Fatalf("error of no known kind: %v", err)
		}
	})
}

// FuzzRobotsToPolicy: any robots.txt converts into a policy that loads.
func FuzzRobotsToPolicy(f *testing.F) {
	f.Add([]byte("User-agent: *\nDisallow: /private/\nAllow: /private/press/\n"))
	f.Add([]byte("User-agent: GPTBot\nUser-agent: CCBot\nDisallow: /\n\nUser-agent: Googlebot\nDisallow: /*.pdf$\nCrawl-delay: 10\n"))
	f.Add([]byte("User-agent: a:b\nDisallow: /a\\b(c)[d]{e}|f\nCrawl-delay: 0.000001\n"))
	f.Add([]byte("User-agent: Mediapartners-Google*\nDisallow: /\n\nUser-agent: *\nAllow: /w/load.php?\nDisallow: /w/\nDisallow: /index.php?title=x\nDisallow: /wiki/L%C3%B6sch\\\"q\n"))
	seedFiles(f, "../../policy/testdata/robots/*.txt")
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxInput {
			return
		}
		for _, o := range []policy.RobotsOptions{{}, {DisallowHonestClients: true}} {
			out, err := policy.RobotsToPolicyWith(strings.NewReader(string(data)), o)
			if err != nil {
				return
			}
			p, err := policy.Parse("robots.yaml", out, noFiles())
			if err != nil {
				t.Fatalf("converted policy does not load: %v\n%s", err, out)
			}
			// It extends the default policy: robots.txt stays readable and
			// the default's last word on anything it does not name.
			if !strings.Contains(string(out), "- import: (builtin)/default.yaml\n") {
				t.Fatalf("does not import the default policy:\n%s", out)
			}
			r := &policy.Request{RemoteAddr: netip.MustParseAddr("192.0.2.1"), Method: "GET", Path: "/robots.txt", Header: http.Header{"User-Agent": {"Anybot/1.0"}}}
			if d := p.Evaluate(r); d.Action != policy.ALLOW {
				t.Fatalf("/robots.txt: %s %q\n%s", d.Action, d.Rule, out)
			}
		}
	})
}

// FuzzEvaluate: the default policy decides any request without panicking;
// Evaluate and Explain agree; /robots.txt always passes; nothing is RATE.
func FuzzEvaluate(f *testing.F) {
	p, err := policy.Default()
	if err != nil {
		f.Fatal(err)
	}
	f.Add("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", "/", "chrome", "HTTP/2.0", ":method,:authority,:scheme,:path", "en")
	f.Add("curl/8.5.0", "/feed.xml", "curl", "HTTP/1.1", "Host,User-Agent", "")
	f.Add("Mozilla/5.0 (compatible; GPTBot/1.2)", "/robots.txt", "", "HTTP/3.0", "", "")
	f.Add("Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) Version/99999999999999999999", "/\xff", "ios", "HTTP/2.0", ":", "x")
	f.Fuzz(func(t *testing.T, ua, path, family, proto, order, lang string) {
		r := &policy.Request{
			ASN:          16509,
			RemoteAddr:   netip.MustParseAddr("192.0.2.1"),
			Method:       "GET",
			Path:         path,
			Proto:        proto,
			TLS:          true,
			Header:       http.Header{"User-Agent": {ua}, "Accept-Language": {lang}},
			HeaderOrder:  strings.Split(order, ","),
			ClientFamily: family,
		}
		d := p.Evaluate(r)
		if !strings.Contains(p.Explain(r), "decision: "+d.Action.String()) {
			t.Fatalf("Explain disagrees with Evaluate (%s)", d.Action)
		}
		if path == "/robots.txt" && d.Action != policy.ALLOW {
			t.Fatalf("/robots.txt: %s", d.Action)
		}
		if d.Action == policy.RATE || d.Action == policy.DIVERT {
			t.Fatalf("the default policy has no RATE or DIVERT rule: %s", d.Action)
		}
		if d.BrowserAgrees && (family == "" || d.Lied() && !d.Signals.Has(policy.SignalHeadless)) {
			t.Fatalf("BrowserAgrees with family %q, signals %v", family, d.AppendNames(nil))
		}
	})
}

// FuzzCompileCondition: a condition (edge.yaml's challenge.when) compiles
// or is refused with ErrExpression, never panics, and one that compiles
// evaluates on any request without panicking; "" is the nil, always-true
// condition.
func FuzzCompileCondition(f *testing.F) {
	for _, s := range []string{
		"", "pressure > 0.5", "storm", "upstream.p95_ms > 800.0 || upstream.queue >= upstream.capacity",
		`verifyFCrDNS(remoteAddress)`, "randInt(2) == 1", "pressure > 1", "load_15m", `cluster.startsWith("ja4:")`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		c, err := policy.CompileCondition(src)
		switch {
		case err != nil && !errors.Is(err, policy.ErrExpression):
			t.Fatalf("error of no known kind: %v", err)
		case err != nil:
			return
		case src == "" && c != nil, c != nil && c.String() != src:
			t.Fatalf("String %q for %q", c.String(), src)
		case len(src) > policy.MaxExpressionLen:
			t.Fatalf("a %d-byte condition compiled", len(src))
		}
		for _, r := range requests() {
			c.Eval(r)
		}
	})
}
