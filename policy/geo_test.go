package policy

import (
	"slices"
	"strings"
	"testing"
)

func TestGeoMatchers(t *testing.T) {
	t.Parallel()
	geo := Options{Geo: Geo{ASN: true, Country: true}}
	tests := []struct {
		name   string
		policy string
		edit   func(r *Request)
		want   Action
	}{
		{"asns hit", `bots: [{name: g, asns: {match: [13335, 16509]}, action: DENY}]`, func(r *Request) { r.ASN = 16509 }, DENY},
		{"asns miss", `bots: [{name: g, asns: {match: [13335]}, action: DENY}]`, func(r *Request) { r.ASN = 3320 }, ALLOW},
		{"asns unknown address", `bots: [{name: g, asns: {match: [13335]}, action: DENY}]`, nil, ALLOW},
		{"geoip hit", `bots: [{name: g, geoip: {countries: [BR, CN]}, action: DENY}]`, func(r *Request) { r.Country = "CN" }, DENY},
		{"geoip lower case in the file", `bots: [{name: g, geoip: {countries: [br]}, action: DENY}]`, func(r *Request) { r.Country = "BR" }, DENY},
		{"geoip miss", `bots: [{name: g, geoip: {countries: [BR]}, action: DENY}]`, func(r *Request) { r.Country = "DE" }, ALLOW},
		{"both must hold", `bots: [{name: g, asns: {match: [16509]}, geoip: {countries: [US]}, action: DENY}]`, func(r *Request) { r.ASN, r.Country = 16509, "DE" }, ALLOW},
		{"with other matchers", `bots: [{name: g, asns: {match: [16509]}, path_regex: ^/wiki/, action: DENY}]`, func(r *Request) { r.ASN = 16509 }, DENY},
		{"asn in CEL", `bots: [{name: g, expression: 'asn == 16509 || asn == 14618', action: DENY}]`, func(r *Request) { r.ASN = 14618 }, DENY},
		{"country in CEL", `bots: [{name: g, expression: 'country in ["US", "CA"]', action: DENY}]`, func(r *Request) { r.Country = "CA" }, DENY},
		{"unknown country in CEL", `bots: [{name: g, expression: 'country == ""', action: DENY}]`, nil, DENY},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := Parse("geo.yaml", []byte(tt.policy+"\nthresholds: [{name: t, expression: weight > 1000, action: DENY}]"), geo)
			if err != nil {
				t.Fatal(err)
			}
			r := chromeRequest()
			if tt.edit != nil {
				tt.edit(r)
			}
			if d := p.Evaluate(r); d.Action != tt.want {
				t.Errorf("got %s, want %s\n%s", d.Action, tt.want, p.Explain(r))
			}
		})
	}
}

// TestGeoWithoutDatabase: a file made only of geo rules loads without
// the databases, with one warning per rule naming the missing key, and its
// rules never match.
func TestGeoWithoutDatabase(t *testing.T) {
	t.Parallel()
	src := `bots:
  - name: asn-rule
    asns: {match: [13335]}
    action: DENY
  - name: country-rule
    geoip: {countries: [US]}
    action: DENY
  - name: cel-rule
    expression: country == "US" || asn == 13335
    action: DENY
`
	p, err := Parse("only-geo.yaml", []byte(src), Options{Geo: Geo{ASN: true}})
	if err != nil {
		t.Fatal(err)
	}
	ws := p.Warnings()
	want := []string{
		`only-geo.yaml:5: rule "country-rule": geoip: needs a country database (geo.country_db in edge.yaml)`,
		`only-geo.yaml:8: rule "cel-rule": expression reads country, which is always "" without a country database (geo.country_db in edge.yaml)`,
	}
	for _, w := range want {
		if !slices.ContainsFunc(ws, func(s string) bool { return strings.HasPrefix(s, w) }) {
			t.Errorf("warnings lack %q:\n%s", w, strings.Join(ws, "\n"))
		}
	}
	if len(ws) != len(want) {
		t.Errorf("%d warnings, want %d (asns: has its database):\n%s", len(ws), len(want), strings.Join(ws, "\n"))
	}
	r := chromeRequest()
	r.ASN, r.Country = 13335, "US"
	if d := p.Evaluate(r); d.Rule != "asn-rule" {
		t.Errorf("rule %q decided, want asn-rule (country-rule never matches without its database)", d.Rule)
	}
	none, err := Parse("only-geo.yaml", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := none.Evaluate(r); d.Rule == "asn-rule" || d.Rule == "country-rule" {
		t.Errorf("a geo rule matched without a database: %q", d.Rule)
	}
}

func TestGeoErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ policy, want string }{
		{`bots: [{name: g, asns: {match: []}, action: DENY}]`, "asns: match: lists no AS number"},
		{`bots: [{name: g, asns: {match: [0]}, action: DENY}]`, "0 is not an AS number"},
		{`bots: [{name: g, asns: {match: [-1]}, action: DENY}]`, "test.yaml:1"},
		{`bots: [{name: g, geoip: {countries: [USA]}, action: DENY}]`, `"USA" is not an ISO 3166-1 alpha-2 country code`},
		{`bots: [{name: g, geoip: {countries: []}, action: DENY}]`, "geoip: countries: lists no country"},
		{"bots: [{name: g, path_regex: x, action: DENY}]\nhosting_asns: [AS0]", "test.yaml:2: hosting_asns"},
		{"bots: [{name: g, path_regex: x, action: DENY}]\nhosting_asns: {keep: [1]}", `unknown key "keep"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("test.yaml", []byte(tt.policy), Options{Geo: Geo{ASN: true, Country: true}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestHostingASNs(t *testing.T) {
	t.Parallel()
	const bots = "bots: [{name: x, path_regex: ^/x$, action: DENY}]\nthresholds: [{name: t, expression: weight > 1000, action: DENY}]\n"
	tests := []struct {
		name   string
		extra  string
		asn    uint32
		ua     string
		family string
		want   bool
	}{
		{"AWS, built-in list", "", 16509, uaChrome, "chrome", true},
		{"Hetzner, built-in list", "", 24940, uaChrome, "chrome", true},
		{"a home network", "", 3320, uaChrome, "chrome", false},
		{"Google's own network is not listed", "", 15169, uaChrome, "chrome", false},
		{"no ASN", "", 0, uaChrome, "chrome", false},
		{"a feed reader on a VPS claims no browser", "", 24940, uaMiniflux, "go", false},
		{"curl in a cloud", "", 16509, "curl/8.5.0", "curl", false},
		{"a crawler's browser part", "", 16509, uaGooglebotSmartphone, "", false},
		{"replaced list", "hosting_asns: [3320]", 3320, uaChrome, "chrome", true},
		{"replaced list drops the built-in", "hosting_asns: [3320]", 16509, uaChrome, "chrome", false},
		{"added", "hosting_asns: {add: [AS64500]}", 64500, uaChrome, "chrome", true},
		{"removed", "hosting_asns: {remove: [24940]}", 24940, uaChrome, "chrome", false},
		{"switched off", "signals: {hosting_asn: off}", 16509, uaChrome, "chrome", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustParse(t, bots+tt.extra)
			r := chromeRequest()
			r.Header.Set("User-Agent", tt.ua)
			r.ClientFamily, r.ASN = tt.family, tt.asn
			if got := p.Evaluate(r).Signals.Has(SignalHostingASN); got != tt.want {
				t.Errorf("hosting_asn = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBuiltinHostingList(t *testing.T) {
	t.Parallel()
	asns, err := builtinHostingASNs()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []uint32{16509, 14618, 396982, 8075, 14061, 24940, 16276, 63949, 45102, 132203, 31898, 51167, 12876, 20473} {
		if !slices.Contains(asns, want) {
			t.Errorf("the built-in hosting list lacks AS%d", want)
		}
	}
	if slices.Contains(asns, 15169) {
		t.Error("AS15169 (Google's own services and crawlers) is listed")
	}
	if _, err := parseASNList("x.txt", []byte("16509\nnot-a-number # c\n")); err == nil || !strings.Contains(err.Error(), "x.txt:2:") {
		t.Errorf("parseASNList error = %v, want x.txt:2", err)
	}
}
