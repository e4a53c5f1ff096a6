package edge

import (
	"crypto/tls"
	mbits "math/bits"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startGateEdge runs the edge with policy (YAML) and a 1s wait.
func startGateEdge(t *testing.T, policy string) *testEdge {
	t.Helper()
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}
	up := echoUpstream(t, "site")
	return startEdge(t, "log: {fingerprints: "+filepath.Join(dir, "fp.jsonl")+"}\npolicy: "+pol+
		"\nchallenge: {wait: {duration: 1s}}\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")
}

// TestWaitWorthItsBits: a rule that asks for more proof of work than a
// wait stands for (Anubis difficulty 7: 28 bits) offers no wait, and
// neither a pass earned by waiting nor one of 16 bits meets it; a rule of
// the default difficulty offers the wait and takes its pass.
func TestWaitWorthItsBits(t *testing.T) {
	t.Parallel()
	e := startGateEdge(t, `bots:
  - {name: hard, path_regex: ^/hard/, action: CHALLENGE, challenge: {algorithm: fast, difficulty: 7}}
  - {name: everyone, path_regex: ., action: CHALLENGE, challenge: {algorithm: fast, difficulty: 4}}
`)
	v := chromeVisitor(t, e)
	res, body := v.get(e, "/hard/page")
	p := parsePage(t, body)
	if res.StatusCode != http.StatusForbidden || p.total() != 28 || p.wait != "" {
		t.Fatalf("the 28-bit rule: %d, %d bits, wait %q; want 403, 28 bits, no wait", res.StatusCode, p.total(), p.wait)
	}

	_, body = v.get(e, "/easy")
	p = parsePage(t, body)
	if p.total() != 16 || p.wait == "" {
		t.Fatalf("the default rule: %d bits, wait %q; want 16 and a wait", p.total(), p.wait)
	}
	if !waitFor(t, 20*time.Second, func() bool {
		res, _ := v.get(e, p.wait)
		return res.StatusCode == http.StatusSeeOther
	}) || v.cookie == "" {
		t.Fatal("the wait never passed")
	}
	if res, _ := v.get(e, "/easy"); res.StatusCode != http.StatusOK {
		t.Errorf("the waited pass where the wait is offered: %d", res.StatusCode)
	}
	if res, body := v.get(e, "/hard/page"); res.StatusCode != http.StatusForbidden || parsePage(t, body).wait != "" {
		t.Errorf("the waited pass where 28 bits are asked: %d; want a challenge without the wait", res.StatusCode)
	}

	pow := chromeVisitor(t, e)
	_, body = pow.get(e, "/easy")
	p = parsePage(t, body)
	if res, _ := pow.get(e, p.pass+"&n="+p.solve()); res.StatusCode != http.StatusSeeOther || pow.cookie == "" {
		t.Fatalf("the 16-bit proof of work: %d", res.StatusCode)
	}
	if res, _ := pow.get(e, "/hard/page"); res.StatusCode != http.StatusForbidden {
		t.Errorf("a 16-bit pass where 28 bits are asked: %d, want 403", res.StatusCode)
	}
}

// total is the proof of work a page asks, in bits: k sub-puzzles of
// bits each are worth bits + log2(k).
func (p challengePage) total() int { return p.bits + mbits.Len(uint(p.k)) - 1 }

// everyoneAt12 challenges every request at 12 bits.
const everyoneAt12 = `bots:
  - {name: everyone, path_regex: ., action: CHALLENGE, challenge: {algorithm: fast, bits: 12}}
`

// TestPassAcrossTransports: a pass earned over HTTP/3 by one TLS stack is
// refused over HTTP/2 to another stack in the same network, and the other
// way round; each still passes where it was earned.
func TestPassAcrossTransports(t *testing.T) {
	t.Parallel()
	e := startGateEdge(t, everyoneAt12)
	earn := func(v *visitor) {
		t.Helper()
		_, body := v.get(e, "/earn")
		p := parsePage(t, body)
		if res, _ := v.get(e, p.pass+"&n="+p.solve()); res.StatusCode != http.StatusSeeOther || v.cookie == "" {
			t.Fatalf("the proof of work: %d", res.StatusCode)
		}
		if res, _ := v.get(e, "/earn"); res.StatusCode != http.StatusOK {
			t.Fatalf("the pass where it was earned: %d", res.StatusCode)
		}
	}
	for _, tt := range []struct{ name, earnedOver, replayedOver string }{
		{"h3 to chrome over h2", "h3", "chrome"},
		{"h3 to go over h1", "h3", "h1"},
		{"chrome over h2 to h3", "chrome", "h3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			visitorOver := func(proto string) *visitor {
				if proto == "chrome" {
					return chromeVisitor(t, e)
				}
				return &visitor{t: t, header: withUA("Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"), c: e.client(t, proto)}
			}
			owner, thief := visitorOver(tt.earnedOver), visitorOver(tt.replayedOver)
			earn(owner)
			thief.cookie = owner.cookie
			res, _ := thief.get(e, "/stolen")
			if res.StatusCode != http.StatusForbidden {
				t.Errorf("a pass earned over %s replayed over %s by another stack: %d, want 403", tt.earnedOver, tt.replayedOver, res.StatusCode)
			}
		})
	}
}

// TestResumedSessionKeepsPass: a client that resumes its TLS session (a
// resumed hello has another JA4: pre_shared_key counts) keeps the pass it
// earned on the full handshake.
func TestResumedSessionKeepsPass(t *testing.T) {
	t.Parallel()
	e := startGateEdge(t, everyoneAt12)
	conf := e.tlsConfig("h2")
	conf.ClientSessionCache = tls.NewLRUClientSessionCache(8)
	tr := &http.Transport{TLSClientConfig: conf, ForceAttemptHTTP2: true, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	v := &visitor{t: t, header: withUA("Go-http-client/2.0"), c: &http.Client{Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	_, body := v.get(e, "/earn")
	p := parsePage(t, body)
	if res, _ := v.get(e, p.pass+"&n="+p.solve()); res.StatusCode != http.StatusSeeOther || v.cookie == "" {
		t.Fatalf("the proof of work: %d", res.StatusCode)
	}
	tr.CloseIdleConnections() // the next request makes a new connection, resuming the session
	req, _ := http.NewRequest("GET", e.url("/after"), nil)
	req.Host = "localhost"
	req.Header.Set("User-Agent", "Go-http-client/2.0")
	req.Header.Set("Cookie", v.cookie)
	res, err := v.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.TLS == nil || !res.TLS.DidResume {
		t.Fatal("the second connection did not resume its session: nothing to test")
	}
	if res.StatusCode != http.StatusOK {
		t.Errorf("a resumed session's pass: %d, want 200", res.StatusCode)
	}
	if strings.HasPrefix(res.Header.Get("Maat-Mitigated"), "challenge") {
		t.Error("challenged again after resuming")
	}
}
