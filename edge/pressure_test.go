package edge

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/edge/internal/upstream"
)

// TestPressureOf: the documented formula, clamped to 0..1.
func TestPressureOf(t *testing.T) {
	t.Parallel()
	const queue = 10 * time.Second
	for _, tt := range []struct {
		name string
		s    upstream.Stats
		want float64
	}{
		{"idle", upstream.Stats{Capacity: 8}, 0},
		{"half the slots", upstream.Stats{InUse: 4, Capacity: 8}, 0.375},
		{"all slots, no line", upstream.Stats{InUse: 8, Capacity: 8}, 0.75},
		{"a line half the slots", upstream.Stats{InUse: 8, Capacity: 8, Queue: 4}, 0.75},
		{"a line as long as the slots", upstream.Stats{InUse: 8, Capacity: 8, Queue: 8}, 1},
		{"a line longer: clamped", upstream.Stats{InUse: 8, Capacity: 8, Queue: 64}, 1},
		{"the oldest waited 9 of 10 s", upstream.Stats{InUse: 8, Capacity: 8, Queue: 1, QueueWait: 9 * time.Second}, 0.9},
		{"no capacity (no upstream)", upstream.Stats{}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := pressureOf(tt.s, queue); got != tt.want {
				t.Errorf("pressureOf(%+v) = %v, want %v", tt.s, got, tt.want)
			}
		})
	}
}

// TestStormHysteresis: storm mode begins when the pressure reaches on,
// holds while it stays above off, and ends only once it has stayed below
// off for hold; a rise above off starts that count again.
func TestStormHysteresis(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	s := stormState{on: 0.5, off: 0.2, hold: 30 * time.Second}
	for i, step := range []struct {
		sec  int
		p    float64
		want bool
	}{
		{0, 0.4, false},  // below on
		{1, 0.5, true},   // reaches on
		{2, 0.3, true},   // between off and on: holds
		{3, 0.1, true},   // below off: the count begins
		{20, 0.1, true},  // 17 s below
		{25, 0.3, true},  // above off again: the count ends
		{26, 0.1, true},  // below off: it begins again
		{55, 0.1, true},  // 29 s below
		{56, 0.1, false}, // 30 s below: off
		{57, 0.45, false},
		{58, 0.6, true},
	} {
		if got := s.observe(at(step.sec), step.p); got != step.want {
			t.Fatalf("step %d (t=%ds, pressure %v): storm %v, want %v", i, step.sec, step.p, got, step.want)
		}
	}
	zero := stormState{on: 0.5, off: 0.2}
	zero.observe(t0, 0.9)
	if zero.observe(t0, 0.1) {
		t.Error("with hold 0s, storm mode outlived a pressure below off")
	}
}

// TestStormRise: storm mode begins only once the pressure has stayed at on
// for rise, observed without a gap: one page's burst (a few hundred
// milliseconds of full slots) is not a storm, nor are two bursts a second
// apart with nothing observed between them.
func TestStormRise(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	s := stormState{on: 0.5, off: 0.2, rise: time.Second, hold: 30 * time.Second}
	for i, step := range []struct {
		ms   int
		p    float64
		want bool
	}{
		{0, 1, false},     // a burst begins
		{100, 1, false},   //
		{300, 1, false},   //
		{400, 0.1, false}, // it is over
		{1200, 1, false},  // another, after a gap: its own count
		{1500, 1, false},
		{1800, 1, false},
		{2100, 1, false}, // 900 ms up
		{2300, 1, true},  // 1.1 s up, observed every 200-300 ms
		{2400, 0.1, true},
		{32400, 0.1, false}, // hold: off
		{32500, 1, false},   // up again
		{32600, 1, false},
		{33000, 1, false}, // a gap of 400 ms: the count starts again
		{33300, 1, false},
		{33600, 1, false},
		{33900, 1, false},
		{34000, 1, true},
	} {
		if got := s.observe(at(step.ms), step.p); got != step.want {
			t.Fatalf("step %d (t=%dms, pressure %v): storm %v, want %v", i, step.ms, step.p, got, step.want)
		}
	}
}

// TestClusterKey: a pass is its own cluster; without one, the TLS and
// HTTP/2 stacks in one network (the ASN, else the /24 or IPv6 /48) are one
// cluster, and another network or stack another.
func TestClusterKey(t *testing.T) {
	t.Parallel()
	a := netip.MustParseAddr
	const ja4, h2 = "t13d1516h2_8daaf6152771_02713d6af862", "1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p"
	k := clusterKey("", ja4, h2, 0, a("192.0.2.7"))
	if len(k) != 16 || strings.Trim(k, "0123456789abcdef") != "" {
		t.Fatalf("key %q is not 16 hex digits", k)
	}
	for _, tt := range []struct {
		name string
		same bool
		key  string
	}{
		{"same /24", true, clusterKey("", ja4, h2, 0, a("192.0.2.200"))},
		{"other /24", false, clusterKey("", ja4, h2, 0, a("192.0.3.7"))},
		{"other TLS stack", false, clusterKey("", "t13d1312h1_f57a46bbacb6_ab7e3b40a677", h2, 0, a("192.0.2.7"))},
		{"other HTTP/2 stack", false, clusterKey("", ja4, "", 0, a("192.0.2.7"))},
		{"a pass", false, clusterKey("eyJhbGciOi.x.y", ja4, h2, 0, a("192.0.2.7"))},
		{"IPv4-mapped", true, clusterKey("", ja4, h2, 0, a("::ffff:192.0.2.9"))},
	} {
		if got := tt.key == k; got != tt.same {
			t.Errorf("%s: same cluster %v, want %v", tt.name, got, tt.same)
		}
	}
	if clusterKey("p1", "", "", 0, a("192.0.2.7")) == clusterKey("p2", "", "", 0, a("192.0.2.7")) {
		t.Error("two passes in one network are one cluster")
	}
	if clusterKey("p1", ja4, h2, 0, a("192.0.2.7")) != clusterKey("p1", "x", "y", 64500, a("198.51.100.1")) {
		t.Error("one pass from two networks is two clusters")
	}
	v6 := clusterKey("", ja4, h2, 0, a("2001:db8:1:2::1"))
	if v6 != clusterKey("", ja4, h2, 0, a("2001:db8:1:ffff::1")) {
		t.Error("two /64s of one IPv6 /48 are two clusters")
	}
	if v6 == clusterKey("", ja4, h2, 0, a("2001:db8:2::1")) {
		t.Error("two IPv6 /48s are one cluster")
	}
	asn := clusterKey("", ja4, h2, 64500, a("192.0.2.7"))
	if asn != clusterKey("", ja4, h2, 64500, a("203.0.113.1")) || asn == k {
		t.Error("with an ASN, the network is the ASN")
	}
}

// TestReadLoadAvg: the three load averages of a /proc/loadavg file; zeros
// without one.
func TestReadLoadAvg(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "loadavg")
	if err := os.WriteFile(p, []byte("0.52 1.58 12.25 2/1187 12345\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := loadAvg{path: p}
	if got := a.read(time.Now()); got != [3]float64{0.52, 1.58, 12.25} {
		t.Errorf("load = %v", got)
	}
	none := loadAvg{path: filepath.Join(t.TempDir(), "none")}
	if got := none.read(time.Now()); got != [3]float64{} {
		t.Errorf("without the file: %v, want zeros", got)
	}
}

// TestPressureNeedsAnUpstream: a policy or a challenge.when that reads the
// upstream's pressure, with a site of static files only, is refused with
// an error that names what reads it and the site; with an upstream on
// every site it is taken. A challenge.when that does not compile is an
// error of its key.
func TestPressureNeedsAnUpstream(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte("bots:\n  - name: busy\n    expression: pressure > 0.5\n    action: CHALLENGE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	static := "sites:\n  - hosts: [a.test]\n    upstream: http://127.0.0.1:1\n  - hosts: [static.test]\n    root: " + root + "\n"
	_, err := NewHandler(mustParse(t, "policy: "+pol+"\n"+static), Env{})
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Key != "policy" || !strings.Contains(err.Error(), `rule "busy"`) ||
		!strings.Contains(err.Error(), "sites[1] (static.test)") || !strings.Contains(err.Error(), "static files only") {
		t.Errorf("a policy reading pressure with a static site: %v", err)
	}
	h, err := NewHandler(mustParse(t, "policy: "+pol+"\nsites: [{hosts: [a.test], upstream: http://127.0.0.1:1}]\n"), Env{})
	if err != nil {
		t.Errorf("a policy reading pressure with an upstream: %v", err)
	} else {
		h.Close()
	}

	for _, tt := range []struct{ name, when, want string }{
		{"storm with a static site", "storm", `challenge.when: "storm" reads the upstream's pressure`},
		{"pressure with a static site", "pressure > 0.5", "sites[1] (static.test) has no upstream"},
		{"not CEL", "pressure >", "challenge.when:"},
		{"not a bool", "pressure", "challenge.when:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Parse("e.yaml", []byte("tls: { mode: self-signed, cache: \"\" }\nchallenge: {when: \""+tt.when+"\"}\n"+static))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("challenge.when %q: %v, want an error with %q", tt.when, err, tt.want)
			}
		})
	}
	if _, err := config.Parse("e.yaml", []byte("tls: { mode: self-signed, cache: \"\" }\nchallenge: {when: \"load_1m > 4.0\"}\n"+static)); err != nil {
		t.Errorf("challenge.when on the load average, a static site: %v", err)
	}
}

func mustParse(t *testing.T, yamlText string) config.Config {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte("tls: { mode: self-signed, cache: \"\" }\n"+yamlText))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}
