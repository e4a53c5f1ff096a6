package edge

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/internal/testenv"
)

// TestFingerprintLogFields checks every contract field of DESIGN.md on lines
// written for HTTP/1.1, HTTP/2 and HTTP/3 requests.
func TestFingerprintLogFields(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	e, fpFile := startLoggingEdge(t, up.URL)
	always := []string{"time", "request_id", "remote_ip", "host", "method", "path", "proto", "tls_version", "sni", "alpn",
		"ja4", "ja4_r", "ja4_o", "ja4_ro", "hfp", "hfp_r", "user_agent", "weight", "action",
		"status", "bytes", "duration_ms"}
	for _, tt := range []struct{ proto, wantProto, hfpPrefix, ja4Prefix string }{
		{"h1", "HTTP/1.1", "h1", "t"}, {"h2", "HTTP/2.0", "h2", "t"}, {"h3", "HTTP/3.0", "h3", "q"},
	} {
		t.Run(tt.proto, func(t *testing.T) {
			t.Parallel()
			path := "/fields/" + tt.proto
			get(t, e.client(t, tt.proto), e.url(path+"?secret=1"), "User-Agent", "fieldtest/1.0")
			l := waitLine(t, fpFile, path)
			for _, k := range always {
				if _, ok := l[k]; !ok {
					t.Errorf("field %s missing: %v", k, l)
				}
			}
			if l.str("proto") != tt.wantProto || l.str("host") != "localhost" || l.str("method") != "GET" ||
				l.str("remote_ip") != "127.0.0.1" || l.str("user_agent") != "fieldtest/1.0" || l.str("sni") != "localhost" ||
				l.str("tls_version") != "1.3" || l.str("action") != "ALLOW" {
				t.Errorf("values: %v", l)
			}
			if l["status"] != float64(200) || l["bytes"].(float64) <= 0 {
				t.Errorf("status/bytes: %v %v", l["status"], l["bytes"])
			}
			if !strings.HasPrefix(l.str("hfp"), tt.hfpPrefix) || !strings.HasPrefix(l.str("ja4"), tt.ja4Prefix) {
				t.Errorf("hfp %q ja4 %q", l.str("hfp"), l.str("ja4"))
			}
			_, hasH2FP := l["h2fp"]
			if hasH2FP != (tt.proto == "h2") {
				t.Errorf("h2fp present=%v on %s", hasH2FP, tt.proto)
			}
			if _, ok := l["ja4h"]; ok {
				t.Error("ja4h logged although it is off")
			}
			if strings.Contains(l.str("path"), "secret") {
				t.Error("the query string reached the log's path")
			}
		})
	}
}

// TestHeaderOrderThroughEdge: curl's X-A/X-B order changes hfp; the same
// order gives the same hfp; curl's HTTP/2 fingerprint is its published one.
func TestHeaderOrderThroughEdge(t *testing.T) {
	t.Parallel()
	curl := testenv.NeedCommand(t, "curl")
	up := echoUpstream(t, "a")
	e, fpFile := startLoggingEdge(t, up.URL)
	p := port(e.Addrs().HTTPS)
	hfp := func(t *testing.T, v, path string, hdrs ...string) fpLine {
		args := []string{"-sk", v, "--max-time", "10", "-o", "/dev/null", "--resolve", "localhost:" + p + ":127.0.0.1"}
		for _, h := range hdrs {
			args = append(args, "-H", h)
		}
		if out, err := exec.Command(curl, append(args, "https://localhost:"+p+path)...).CombinedOutput(); err != nil {
			t.Fatalf("curl: %v %s", err, out)
		}
		return waitLine(t, fpFile, path)
	}
	for _, v := range []string{"--http1.1", "--http2"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			ab1 := hfp(t, v, "/order"+v+"/ab1", "X-A: 1", "X-B: 2")
			ab2 := hfp(t, v, "/order"+v+"/ab2", "X-A: 1", "X-B: 2")
			ba := hfp(t, v, "/order"+v+"/ba", "X-B: 2", "X-A: 1")
			if ab1.str("hfp") != ab2.str("hfp") {
				t.Errorf("same order, different hfp: %s %s", ab1.str("hfp"), ab2.str("hfp"))
			}
			if ab1.str("hfp") == ba.str("hfp") {
				t.Errorf("swapped order, same hfp %s (%s vs %s)", ba.str("hfp"), ab1.str("hfp_r"), ba.str("hfp_r"))
			}
			if !strings.HasSuffix(ab1.str("hfp_r"), "x-a,x-b") || !strings.HasSuffix(ba.str("hfp_r"), "x-b,x-a") {
				t.Errorf("hfp_r %q / %q", ab1.str("hfp_r"), ba.str("hfp_r"))
			}
			if v == "--http2" {
				if got := ab1.str("h2fp"); got != "3:100;4:33554432;2:0|33488897|0|m,p,s,a" {
					t.Errorf("curl's h2fp %q", got)
				}
			}
		})
	}
}

// TestMetricsEndpoint: the admin /metrics parses as Prometheus text, counts
// requests, and random Host headers add no series.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	e, _ := startLoggingEdge(t, up.URL)
	c := e.client(t, "h2")
	series := func() (int, map[string]*dto.MetricFamily) {
		res, err := http.Get("http://" + e.Addrs().Admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(bufio.NewReader(strings.NewReader(string(body))))
		if err != nil {
			t.Fatalf("metrics do not parse: %v", err)
		}
		n := 0
		for name, f := range fams {
			if strings.HasPrefix(name, "maat_") {
				n += len(f.Metric)
			}
		}
		return n, fams
	}
	get(t, c, e.url("/warm"))
	req, _ := http.NewRequest("GET", e.url("/warm"), nil)
	req.Host = "nosuch.test"
	if res, err := c.Do(req); err == nil {
		res.Body.Close()
	}
	before, _ := series()
	for i := range 200 {
		req, _ := http.NewRequest("GET", e.url("/flood"), nil)
		req.Host = fmt.Sprintf("r%d-%d.test", i, rand.Int())
		req.Header.Set("User-Agent", fmt.Sprintf("ua-%d", rand.Int()))
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	after, fams := series()
	if after != before {
		t.Errorf("a flood of random Host headers changed the maat_ series count: %d → %d", before, after)
	}
	f := fams["maat_requests_total"]
	if f == nil {
		t.Fatal("no maat_requests_total")
	}
	var unknown float64
	for _, m := range f.Metric {
		for _, lp := range m.Label {
			if lp.GetName() == "site" && lp.GetValue() == "unknown" {
				unknown += m.GetCounter().GetValue()
			}
		}
	}
	if unknown < 200 {
		t.Errorf("unknown-site requests counted %v, want ≥ 200", unknown)
	}
	for _, name := range []string{"maat_tls_handshakes_total", "maat_upstream_duration_seconds", "maat_certificate_expiry_timestamp_seconds", "maat_fplog_lines_total"} {
		if fams[name] == nil {
			t.Errorf("metric %s missing", name)
		}
	}
}

// TestJA4HReload switches fingerprints.ja4h on by a reload: new
// connections of every protocol then log JA4H (HTTP/3's fingerprints come
// from a tracer built per connection, not once at start).
func TestJA4HReload(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t, "a")
	e, fpFile := startLoggingEdge(t, up.URL)
	cfgText := "listen: { https: \"127.0.0.1:0\", http: \"127.0.0.1:0\", admin: \"127.0.0.1:0\" }\n" +
		"tls: { mode: self-signed, cache: \"\" }\nlog: {fingerprints: " + fpFile + "}\n" +
		"sites: [{hosts: [localhost], upstream: " + up.URL + "}]\nfingerprints: {ja4h: true}\n"
	cfg, err := config.Parse("reload.yaml", []byte(cfgText))
	if err != nil {
		t.Fatal(err)
	}
	get(t, e.client(t, "h3"), e.url("/ja4h/before"))
	if l := waitLine(t, fpFile, "/ja4h/before"); l.str("ja4h") != "" {
		t.Fatalf("ja4h %q before the reload", l.str("ja4h"))
	}
	if err := e.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	for _, proto := range []string{"h1", "h2", "h3"} {
		path := "/ja4h/after/" + proto
		get(t, e.client(t, proto), e.url(path)) // a new client: a new connection
		l := waitLine(t, fpFile, path)
		if ja4h := l.str("ja4h"); len(ja4h) < 12 || !strings.HasPrefix(ja4h, "ge") {
			t.Errorf("%s after the reload: ja4h %q", proto, ja4h)
		}
	}
}
