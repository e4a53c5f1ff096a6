package policy

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestLoadVariables: each variable of the site's load and the cluster
// reads its Request field in a rule expression, a threshold expression
// and a condition alike.
func TestLoadVariables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr    string
		yes, no func(*Request)
	}{
		{"pressure > 0.5", func(r *Request) { r.Pressure = 0.51 }, func(r *Request) { r.Pressure = 0.5 }},
		{"pressure == 0.0", func(*Request) {}, func(r *Request) { r.Pressure = 0.01 }},
		{"storm", func(r *Request) { r.Storm = true }, func(*Request) {}},
		{"!storm", func(*Request) {}, func(r *Request) { r.Storm = true }},
		{"upstream.in_use >= 8.0", func(r *Request) { r.Upstream.InUse = 8 }, func(r *Request) { r.Upstream.InUse = 7 }},
		{"upstream.capacity == 8.0", func(r *Request) { r.Upstream.Capacity = 8 }, func(r *Request) { r.Upstream.Capacity = 32 }},
		{"upstream.queue > 10.0", func(r *Request) { r.Upstream.Queue = 11 }, func(r *Request) { r.Upstream.Queue = 10 }},
		{`upstream["queue_wait_ms"] > 250.0`, func(r *Request) { r.Upstream.QueueWaitMs = 251 }, func(r *Request) { r.Upstream.QueueWaitMs = 250 }},
		{"upstream.p50_ms > 100.0", func(r *Request) { r.Upstream.P50Ms = 100.5 }, func(r *Request) { r.Upstream.P50Ms = 99 }},
		{"upstream.p95_ms > 1000.0", func(r *Request) { r.Upstream.P95Ms = 1500 }, func(r *Request) { r.Upstream.P95Ms = 900 }},
		{"upstream.in_use / upstream.capacity >= 0.75", func(r *Request) { r.Upstream.InUse, r.Upstream.Capacity = 6, 8 }, func(r *Request) { r.Upstream.InUse, r.Upstream.Capacity = 5, 8 }},
		{"load_1m >= 10.0", func(r *Request) { r.Load[0] = 10 }, func(r *Request) { r.Load = [3]float64{9.99, 20, 20} }},
		{"load_5m >= 10.0", func(r *Request) { r.Load[1] = 10 }, func(r *Request) { r.Load = [3]float64{20, 9.99, 20} }},
		{"load_15m <= 4.0", func(r *Request) { r.Load = [3]float64{20, 20, 4} }, func(r *Request) { r.Load[2] = 4.01 }},
		{`cluster == "ja4:t13d|as64496"`, func(r *Request) { r.Cluster = "ja4:t13d|as64496" }, func(r *Request) { r.Cluster = "ja4:t13d|as64497" }},
		{`cluster == ""`, func(*Request) {}, func(r *Request) { r.Cluster = "x" }},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			rule := mustParse(t, "bots: [{name: r, action: DENY, expression: '"+tt.expr+"'}]")
			var thr *Policy
			if !strings.Contains(tt.expr, "cluster") { // thresholds read the site's load, not the client
				thr = mustParse(t, "bots: [{name: n, path_regex: ^/never$, action: DENY}]\nthresholds: [{name: t, action: DENY, expression: '"+tt.expr+"'}]")
			}
			cond, err := CompileCondition(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				edit func(*Request)
				want bool
			}{{tt.yes, true}, {tt.no, false}} {
				r := chromeRequest()
				c.edit(r)
				if got := rule.Evaluate(r).Action == DENY; got != c.want {
					t.Errorf("rule: %+v: matched %v, want %v", r.Upstream, got, c.want)
				}
				if thr != nil {
					if got := thr.Evaluate(r).Action == DENY; got != c.want {
						t.Errorf("threshold: matched %v, want %v", got, c.want)
					}
				}
				if got := cond.Eval(r); got != c.want {
					t.Errorf("condition: %v, want %v", got, c.want)
				}
			}
		})
	}
}

// TestAnubisLoadRules: the load rules of Anubis's default policy
// ((data)/botPolicies.yaml, commented out there), uncommented, weigh as in
// Anubis: load_1m and load_15m are the system load average the edge fills
// in Request.Load, no longer always 0.
func TestAnubisLoadRules(t *testing.T) {
	t.Parallel()
	data, err := readAnubisData("botPolicies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Uncomment the two rules between "## System load based checks" and
	// "# Generic catchall rule", as an operator does.
	src := string(data)
	i, j := strings.Index(src, "  # ## System load based checks."), strings.Index(src, "  # Generic catchall rule")
	if i < 0 || j < i {
		t.Fatal("the load rules are not where Anubis's file had them")
	}
	var out []string
	for _, l := range strings.Split(src[i:j], "\n") {
		if rest, ok := strings.CutPrefix(l, "  # "); ok && !strings.HasPrefix(rest, "#") {
			l = "  " + rest
		}
		out = append(out, l)
	}
	p, err := Parse("botPolicies.yaml", []byte(src[:i]+strings.Join(out, "\n")+src[j:]), Options{})
	if err != nil {
		t.Fatal(err)
	}
	rules := func(d Decision) []string {
		var names []string
		for n := range d.Rules {
			if strings.HasSuffix(n, "-load-average") {
				names = append(names, n)
			}
		}
		return names
	}
	base := chromeRequest()
	base.Load = [3]float64{5, 5, 5}
	want0 := p.Evaluate(base)
	if got := rules(want0); len(got) != 0 {
		t.Fatalf("load 5: rules %q, want none", got)
	}
	tests := []struct {
		load   [3]float64
		rules  []string
		adjust int
	}{
		{[3]float64{10, 5, 5}, []string{"high-load-average"}, 20},
		{[3]float64{9.99, 5, 5}, nil, 0},
		{[3]float64{5, 5, 4}, []string{"low-load-average"}, -10},
		{[3]float64{12, 8, 3}, []string{"high-load-average", "low-load-average"}, 10},
		{[3]float64{0, 0, 0}, []string{"low-load-average"}, -10}, // an edge that fills no load: as Anubis on an idle host
	}
	for _, tt := range tests {
		r := chromeRequest()
		r.Load = tt.load
		d := p.Evaluate(r)
		if got := rules(d); !slices.Equal(got, tt.rules) {
			t.Errorf("load %v: rules %q, want %q", tt.load, got, tt.rules)
		}
		if d.Weight != want0.Weight+tt.adjust {
			t.Errorf("load %v: weight %d, want %d", tt.load, d.Weight, want0.Weight+tt.adjust)
		}
	}
}

// TestStormThresholds: a threshold that reads storm decides by the
// request's Storm, on the fast path, and the no-JS wait's bound follows
// the threshold that decides (WaitMaxWeightFor); a threshold that reads
// pressure runs in CEL and decides alike.
func TestStormThresholds(t *testing.T) {
	t.Parallel()
	const src = `bots: [{name: n, path_regex: ^/never$, action: DENY}]
thresholds:
  - {name: calm, action: ALLOW, expression: "weight < 20 && !storm"}
  - {name: storm-wait, action: CHALLENGE, expression: "weight < 5", challenge: {algorithm: metarefresh, difficulty: 1}}
  - {name: suspicion, action: CHALLENGE, expression: "weight < 20", challenge: {algorithm: fast, difficulty: 2}}
  - {name: bot, action: DENY, expression: "weight >= 20"}
`
	p := mustParse(t, src)
	for i := range p.thresholds {
		if p.thresholds[i].pred == nil {
			t.Errorf("threshold %s: not on the fast path", p.thresholds[i].name)
		}
	}
	if !p.UsesPressure() || !slices.Equal(p.PressureUsers(), []string{`test.yaml:3: threshold "calm"`}) {
		t.Errorf("UsesPressure = %v, %q", p.UsesPressure(), p.PressureUsers())
	}
	calm, storm := &Request{}, &Request{Storm: true}
	if got := p.WaitMaxWeightFor(calm); got != 0 {
		t.Errorf("calm: WaitMaxWeightFor = %d, want 0 (no threshold challenges below 20)", got)
	}
	if got, want := p.WaitMaxWeightFor(storm), 5; got != want {
		t.Errorf("storm: WaitMaxWeightFor = %d, want %d", got, want)
	}
	if p.WaitMaxWeight() != p.WaitMaxWeightFor(calm) || p.WaitMaxWeightFor(nil) != p.WaitMaxWeight() {
		t.Error("WaitMaxWeight is not the calm bound")
	}
	pp := mustParse(t, strings.Replace(src, `weight < 20 && !storm`, `weight < 20 && pressure < 0.5`, 1))
	if pp.thresholds[0].pred != nil {
		t.Error("a threshold that reads pressure is on the fast path")
	}
	for _, tt := range []struct {
		pol  *Policy
		r    Request
		want string
	}{
		{p, Request{}, "calm"},
		{p, Request{Storm: true}, "storm-wait"},
		{pp, Request{Pressure: 0.2}, "calm"},
		{pp, Request{Pressure: 0.9}, "storm-wait"},
	} {
		r := chromeRequest()
		r.Storm, r.Pressure = tt.r.Storm, tt.r.Pressure
		r.Header.Set("User-Agent", "") // no rule but the thresholds, weight 0
		if d := tt.pol.Evaluate(r); d.Rule != tt.want {
			t.Errorf("storm %v pressure %v: threshold %q (weight %d), want %q", r.Storm, r.Pressure, d.Rule, d.Weight, tt.want)
		}
	}
	if got, want := pp.WaitMaxWeightFor(storm), 5; got != want {
		t.Errorf("pressure threshold, storm: WaitMaxWeightFor = %d, want %d", got, want)
	}
}

// TestUsesPressure: a policy uses pressure when a rule or threshold
// expression reads pressure, storm or upstream; load_1m/5m/15m and
// cluster do not count (every edge fills them).
func TestUsesPressure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      []string
	}{
		{"rule pressure", "bots: [{name: r, action: CHALLENGE, expression: 'pressure > 0.5'}]", []string{`test.yaml:1: rule "r"`}},
		{"rule upstream", "bots: [{name: r, action: DENY, expression: {all: ['path == \"/x\"', 'upstream.queue > 1.0']}}]", []string{`test.yaml:1: rule "r"`}},
		{"threshold storm", "bots: [{name: n, path_regex: ^/never$, action: DENY}]\nthresholds: [{name: t, action: DENY, expression: 'weight > 1 || storm'}]", []string{`test.yaml:2: threshold "t"`}},
		{"load only", "bots: [{name: r, action: WEIGH, expression: 'load_1m >= 10.0'}]", nil},
		{"cluster only", "bots: [{name: r, action: DENY, expression: 'cluster == \"x\"'}]", nil},
		{"no expression", "bots: [{name: r, action: DENY, path_regex: ^/x$}]", nil},
		{"name only", "bots: [{name: pressure, action: DENY, path_regex: storm}]", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, tt.src)
			if p.UsesPressure() != (tt.want != nil) || !slices.Equal(p.PressureUsers(), tt.want) {
				t.Errorf("UsesPressure = %v, PressureUsers = %q, want %q", p.UsesPressure(), p.PressureUsers(), tt.want)
			}
		})
	}
	if p := mustDefault(t); p.UsesPressure() {
		t.Errorf("the default policy uses pressure: %q", p.PressureUsers())
	}
	for expr, want := range map[string]bool{"pressure > 0.5": true, "storm": true, "upstream.queue > 0.0": true, "load_1m > 1.0": false, `cluster != ""`: false} {
		c, err := CompileCondition(expr)
		if err != nil {
			t.Fatal(err)
		}
		if c.UsesPressure() != want {
			t.Errorf("condition %q: UsesPressure = %v, want %v", expr, c.UsesPressure(), want)
		}
	}
}

// TestCondition: "" is nil and always true; String gives the source; bad
// input is refused with an error that says why.
func TestCondition(t *testing.T) {
	t.Parallel()
	c, err := CompileCondition("")
	if err != nil || c != nil {
		t.Fatalf(`CompileCondition("") = %v, %v; want nil, nil`, c, err)
	}
	if !c.Eval(&Request{}) || c.UsesPressure() || c.String() != "" {
		t.Error("a nil Condition is not always true")
	}
	c, err = CompileCondition(`pressure > 0.5 && !path.startsWith("/api/")`)
	if err != nil {
		t.Fatal(err)
	}
	if c.String() != `pressure > 0.5 && !path.startsWith("/api/")` {
		t.Errorf("String = %q", c.String())
	}
	r := chromeRequest()
	r.Pressure = 0.7
	if !c.Eval(r) {
		t.Error("false under pressure")
	}
	r.Path = "/api/v1"
	if c.Eval(r) {
		t.Error("true for the API path")
	}
	// A run-time error does not hold.
	if c, err := CompileCondition(`headers["X-Missing"] == "1" || pressure > 2.0`); err != nil || c.Eval(chromeRequest()) {
		t.Errorf("run-time error: %v, %v", c.Eval(chromeRequest()), err)
	}

	bad := []struct{ expr, err string }{
		{"pressure >", "Syntax error"},
		{"pressure", "returns double, not bool (compare it: pressure > 0.5)"},
		{`"yes"`, "returns string, not bool"},
		{"pressure > 1", "values are doubles and CEL does not compare a double with an int: write 0.5, 10.0"},
		{"load_1m >= 10", "end the number in .0"},
		{"nosuchvar > 0.5", "undeclared reference to 'nosuchvar'"},
		{"upstream.conns > 1.0", `upstream has no key "conns" (keys: in_use, capacity, queue, queue_wait_ms, p50_ms, p95_ms)`},
		{`upstream["waiting"] > 1.0`, `upstream has no key "waiting"`},
		{`verifyFCrDNS(remoteAddress, "googlebot\\.com$")`, "verifyFCrDNS: a condition cannot call it: it needs a DNS lookup"},
		{`size(reverseDNS(remoteAddress)) > 0`, "reverseDNS: a condition cannot call it: it needs a DNS lookup"},
		{`lookupHost("example.org") == []`, "lookupHost"},
		{"randInt(10) > 5 && pressure > 0.5", "randInt: a condition cannot call it: it answers differently each time"},
		{strings.Repeat("storm || ", MaxExpressionLen/9+1) + "storm", "longer than 4096 bytes"},
	}
	for _, tt := range bad {
		c, err := CompileCondition(tt.expr)
		if err == nil {
			t.Errorf("%.40q: compiled (%v), want an error", tt.expr, c)
			continue
		}
		if !errors.Is(err, ErrExpression) || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%.40q: error %q, want ErrExpression and %q", tt.expr, err, tt.err)
		}
	}
	// The same checks hold in a policy's rules.
	if _, err := Parse("p.yaml", []byte("bots: [{name: r, action: DENY, expression: 'upstream.conns > 1.0'}]"), Options{}); err == nil || !strings.Contains(err.Error(), `p.yaml:1: rule "r": expression: policy: bad expression: upstream has no key "conns"`) {
		t.Errorf("rule with a bad upstream key: %v", err)
	}
}

// TestRateKeys: a RATE rule counts by cluster, ASN, header fingerprint or
// HTTP/2 fingerprint: requests of two clusters go to two buckets, the
// same cluster's requests from many addresses go to one; a request
// without the key's value counts by its address.
func TestRateKeys(t *testing.T) {
	t.Parallel()
	type client struct {
		addr               string
		cluster, hfp, h2fp string
		asn                uint32
	}
	tests := []struct {
		key string
		// same: clients that share one bucket; other: a client in another
		// bucket than same's; none: a client without the key's value.
		same  []client
		other client
		none  client
		want  string // the bucket of same, after the rule id
	}{
		{"cluster",
			[]client{{addr: "198.51.100.1", cluster: "c1"}, {addr: "203.0.113.9", cluster: "c1"}, {addr: "2001:db8::1", cluster: "c1"}},
			client{addr: "198.51.100.1", cluster: "c2"}, client{addr: "192.0.2.77"}, "cluster:c1"},
		{"asn",
			[]client{{addr: "198.51.100.1", asn: 64496}, {addr: "203.0.113.9", asn: 64496, cluster: "x"}},
			client{addr: "198.51.100.1", asn: 64497}, client{addr: "192.0.2.77"}, "asn:64496"},
		{"hfp",
			[]client{{addr: "198.51.100.1", hfp: "h1"}, {addr: "203.0.113.9", hfp: "h1"}},
			client{addr: "198.51.100.1", hfp: "h2"}, client{addr: "192.0.2.77"}, "hfp:h1"},
		{"h2fp",
			[]client{{addr: "198.51.100.1", h2fp: h2fpGo}, {addr: "203.0.113.9", h2fp: h2fpGo}},
			client{addr: "198.51.100.1", h2fp: h2fpCurl}, client{addr: "192.0.2.77"}, "h2fp:" + h2fpGo},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, "bots: [{name: r, path_regex: ., action: RATE, rate: {key: "+tt.key+", per_second: 5, burst: 20}}]")
			key := func(c client) string {
				r := chromeRequest()
				r.RemoteAddr = netip.MustParseAddr(c.addr)
				r.Cluster, r.HFP, r.H2FP, r.ASN = c.cluster, c.hfp, c.h2fp, c.asn
				d := p.Evaluate(r)
				if d.Action != RATE || d.Rate.Rate != 5 || d.Rate.Burst != 20 {
					t.Fatalf("%+v: %s %+v", c, d.Action, d.Rate)
				}
				k, ok := strings.CutPrefix(d.Rate.Key, d.RuleID+":")
				if !ok {
					t.Fatalf("key %q does not start with the rule id", d.Rate.Key)
				}
				return k
			}
			for _, c := range tt.same {
				if k := key(c); k != tt.want {
					t.Errorf("%+v: bucket %q, want %q", c, k, tt.want)
				}
			}
			if k := key(tt.other); k == tt.want {
				t.Errorf("%+v: in the bucket of another %s", tt.other, tt.key)
			}
			if k, want := key(tt.none), "ip:192.0.2.0/24"; k != want {
				t.Errorf("without a %s: bucket %q, want %q", tt.key, k, want)
			}
		})
	}
	_, err := Parse("p.yaml", []byte("bots: [{name: r, path_regex: ., action: RATE, rate: {key: subnet, per_second: 5}}]"), Options{})
	if want := `p.yaml:1: rule "r": rate key "subnet": want one of ip, ja4, pass, cluster, asn, hfp, h2fp`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("unknown key: %v, want %q", err, want)
	}
}

// TestDefaultChallengeUnderPressure: the default policy's calm-browser
// line, uncommented, lets an honest browser pass on a calm day and
// challenges it in a storm; a browser that fired a signal is challenged
// either way, and a client that lied is never offered the wait.
func TestDefaultChallengeUnderPressure(t *testing.T) {
	t.Parallel()
	const line = `  # - { name: calm-browser, expression: "weight < 20 && !storm", action: ALLOW }`
	src := string(DefaultPolicyYAML())
	if !strings.Contains(src, line) {
		t.Fatal("the default policy has no calm-browser line")
	}
	if d := mustDefault(t).Evaluate(chromeRequest()); d.Action != CHALLENGE || d.Rule != "browser" {
		t.Fatalf("default policy, calm: %s %q, want the browser challenge as before", d.Action, d.Rule)
	}
	p, err := Parse(DefaultName, []byte(strings.Replace(src, line, strings.Replace(line, "# ", "", 1), 1)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.UsesPressure() {
		t.Error("UsesPressure is false")
	}
	tests := []struct {
		name  string
		req   func() *Request
		storm bool
		want  Action
		rule  string
	}{
		{"honest chrome, calm", chromeRequest, false, ALLOW, "calm-browser"},
		{"honest chrome, storm", chromeRequest, true, CHALLENGE, "browser"},
		{"curl with a Chrome UA, calm", func() *Request { return curlRequest(uaChrome) }, false, CHALLENGE, "suspicion"},
		{"curl own UA, storm", func() *Request { return curlRequest("curl/8.5.0") }, true, ALLOW, "curl"},
	}
	for _, tt := range tests {
		r := tt.req()
		r.Storm = tt.storm
		if d := p.Evaluate(r); d.Action != tt.want || d.Rule != tt.rule {
			t.Errorf("%s: %s %q (weight %d), want %s %q", tt.name, d.Action, d.Rule, d.Weight, tt.want, tt.rule)
		}
	}
	if calm, storm := p.WaitMaxWeightFor(&Request{}), p.WaitMaxWeightFor(&Request{Storm: true}); calm != 40 || storm != 20 {
		t.Errorf("WaitMaxWeightFor: calm %d, storm %d; want 40 and 20, as default.yaml says", calm, storm)
	}
}

// TestExplainSiteLoad: Explain shows the site's load it decided with when
// the policy reads it, and nothing of it when the policy does not.
func TestExplainSiteLoad(t *testing.T) {
	t.Parallel()
	r := chromeRequest()
	r.Pressure, r.Storm = 0.625, true
	r.Upstream = UpstreamLoad{InUse: 8, Capacity: 8, Queue: 24, QueueWaitMs: 120, P50Ms: 80, P95Ms: 900}
	r.Load = [3]float64{1.2, 0.8, 0.5}
	const want = "check site load: as given: pressure 0.62, storm on; upstream 8/8 in use, 24 queued (wait 120 ms), p50 80 ms, p95 900 ms; load average 1.20 0.80 0.50\n"
	for _, src := range []string{"bots: [{name: r, action: DENY, expression: 'storm'}]", "bots: [{name: r, action: WEIGH, expression: 'load_5m > 4.0'}]"} {
		if got := mustParse(t, src).Explain(r); !strings.Contains(got, want) {
			t.Errorf("%s: Explain:\n%s\nwant the line %q", src, got, want)
		}
	}
	if got := mustDefault(t).Explain(r); strings.Contains(got, "site load") {
		t.Errorf("default policy: Explain shows the site's load:\n%s", got)
	}
}
