package edge

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/tlsfp"
)

const (
	denyXPolicy  = "bots:\n  - { name: no-x, path_regex: ^/x, action: DENY }\nthresholds:\n  - { name: rest, expression: \"true\", action: ALLOW }\n"
	allowXPolicy = "bots:\n  - { name: yes-x, path_regex: ^/x, action: ALLOW }\nthresholds:\n  - { name: rest, expression: \"true\", action: ALLOW }\n"
)

// TestSitePolicies: through the edge, the same request to two sites with
// different policies (sites[].policy) gets different decisions; sites that
// name the same file share one compiled policy, a site without one has
// the global; a reload swaps a site's policy.
func TestSitePolicies(t *testing.T) {
	t.Parallel()
	deny := writePolicy(t, "deny.yaml", denyXPolicy)
	allow := writePolicy(t, "allow.yaml", allowXPolicy)
	up := echoUpstream(t, "up")
	sites := func(aPolicy string) string {
		return "policy: " + allow + "\nsites:\n" +
			"  - { hosts: [a.test], upstream: " + up.URL + ", policy: " + aPolicy + " }\n" +
			"  - { hosts: [b.test], upstream: " + up.URL + " }\n" +
			"  - { hosts: [c.test], upstream: " + up.URL + ", policy: " + deny + " }\n" +
			"  - { hosts: [d.test], upstream: " + up.URL + ", policy: " + allow + " }\n"
	}
	e := startEdge(t, sites(deny))
	want := func(host, status string) {
		t.Helper()
		got, err := getHost(t, e, host, "/x")
		if err != nil || !strings.HasPrefix(got, status+" ") {
			t.Errorf("%s/x: %.60q, %v; want %s", host, got, err, status)
		}
	}
	want("a.test", "403")
	want("b.test", "200")
	want("c.test", "403")
	want("d.test", "200")

	h := e.Server.handler.Load()
	a, b, c, d := h.policyFor(h.sites.list[0]), h.policyFor(h.sites.list[1]), h.policyFor(h.sites.list[2]), h.policyFor(h.sites.list[3])
	if a != c || a == b {
		t.Errorf("sites naming the same file do not share its policy, or different files do: %p %p %p", a, b, c)
	}
	if b != h.global || d != h.global {
		t.Errorf("a site without a policy, or naming the global's file, has its own: %p %p, global %p", b, d, h.global)
	}

	if err := reloadText(t, e.Server, "", sites(allow)); err != nil {
		t.Fatal(err)
	}
	want("a.test", "200")
	want("c.test", "403")
}

// TestSitePolicyErrorsNameTheSite: a site's policy that does not compile
// is the error of that site's key.
func TestSitePolicyErrorsNameTheSite(t *testing.T) {
	t.Parallel()
	bad := writePolicy(t, "bad.yaml", "bots:\n  - { name: x, action: FOO }\n")
	cfg, err := config.Parse("e.yaml", []byte("tls: { mode: self-signed, cache: \"\" }\nsites:\n"+
		"  - { hosts: [a.test], upstream: \"http://127.0.0.1:1\" }\n"+
		"  - { hosts: [b.test], upstream: \"http://127.0.0.1:1\", policy: "+bad+" }\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewHandler(cfg, Env{})
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Key != "sites[1].policy" || !strings.Contains(err.Error(), bad+":2:") {
		t.Fatalf("err = %v, want one of sites[1].policy naming %s:2", err, bad)
	}
}

// TestEarlyRefusalWithSitePolicies: a connection is refused at its
// ClientHello only when every site's policy denies it (its requests may be
// for any site), and never while a site runs dry.
func TestEarlyRefusalWithSitePolicies(t *testing.T) {
	t.Parallel()
	noCurl := writePolicy(t, "nocurl.yaml", "bots:\n  - { name: no-curl, client_family: [curl], action: DENY }\n")
	noQUIC := writePolicy(t, "noquic.yaml", "bots:\n  - { name: no-quic, ja4: [\"q*\"], action: DENY }\n")
	both := writePolicy(t, "both.yaml", "bots:\n  - { name: no-curl, client_family: [curl], action: DENY }\n  - { name: no-quic, ja4: [\"q*\"], action: DENY }\n")
	peer := netip.MustParseAddr("192.0.2.1")
	curl := &tlsfp.Fingerprint{JA4: "t13d1712h2_aaaaaaaaaaaa_bbbbbbbbbbbb", Client: tlsfp.Client{Family: "curl"}}
	quic := &tlsfp.Fingerprint{JA4: "q13d0310h3_55b375c5d22e_cd85d2d88918", Client: tlsfp.Client{Family: "chrome"}}
	denied := func(h *Handler, fp *tlsfp.Fingerprint) bool {
		_, deny := h.denyConn(fp, peer)
		return h.refusesEarly() && deny
	}
	site := func(host, extra string) string {
		return "  - { hosts: [" + host + "], upstream: \"http://127.0.0.1:1\"" + extra + " }\n"
	}
	for _, tt := range []struct {
		name, yaml       string
		early, curl, qui bool
	}{
		{"one policy", "policy: " + noCurl + "\nsites:\n" + site("a.test", ""), true, true, false},
		{"global dry run", "policy: " + noCurl + "\ndry_run: true\nsites:\n" + site("a.test", ""), false, false, false},
		{"one site dry", "policy: " + noCurl + "\nsites:\n" + site("a.test", "") + site("b.test", ", dry_run: true"), false, false, false},
		{"a site whose policy denies no connection", "policy: " + noCurl + "\nsites:\n" + site("a.test", "") + site("b.test", ", policy: "+writePolicy(t, "allow.yaml", allowXPolicy)), false, false, false},
		{"each policy denies another client", "policy: " + noCurl + "\nsites:\n" + site("a.test", "") + site("b.test", ", policy: "+noQUIC), true, false, false},
		{"both policies deny curl", "policy: " + both + "\nsites:\n" + site("a.test", "") + site("b.test", ", policy: "+noCurl), true, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newTestHandler(t, "limits: {refuse_early: true}\n"+tt.yaml)
			if got := h.refusesEarly(); got != tt.early {
				t.Errorf("refusesEarly = %v, want %v", got, tt.early)
			}
			if got := denied(h, curl); got != tt.curl {
				t.Errorf("curl refused early: %v, want %v", got, tt.curl)
			}
			if got := denied(h, quic); got != tt.qui {
				t.Errorf("a QUIC client refused early: %v, want %v", got, tt.qui)
			}
		})
	}
}
