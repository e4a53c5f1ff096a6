package edge

import (
	"errors"
	"strings"
	"testing"

	"github.com/maatproxy/maat/edge/config"
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
