package testattack

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// The address and header cases: forwarded addresses (issue 33, item 5),
// redirects (item 6), what a tarpit is given (item 7).

// gateForwarded sends X-Forwarded-For spellings from a trusted proxy: the
// client it names, an address of its own for a hidden one, or a 400 for
// garbage; a request served with the proxy itself as its client (in the
// fingerprint log's remote_ip, or the upstream's X-Real-Ip) got through:
// every client behind the proxy would share its limits and its policy
// view.
func gateForwarded(ctx context.Context, t GateTarget, out *GateOutcome) error {
	t.Upstream.Record(1000)
	proxy := source(blockGateProxy, 0)
	for i, tt := range []struct {
		xff, expected string
		honest        bool
	}{
		{"1.2.3.4", "served as 1.2.3.4", true},
		{"1.2.3.4:5678", "served as 1.2.3.4", false},
		{"9.9.9.9, 1.2.3.4:5678", "served as 1.2.3.4", false},
		{"[2001:db8::7]:443", "served as 2001:db8::7", false},
		{"unknown", "served as a hidden client's own address, or 400", false},
		{"_hidden", "served as a hidden client's own address, or 400", false},
		{"garbage", "400", false},
		{"1.2.3.4:5678:9", "400", false},
		{"1.2.3.4, garbage", "400", false},
	} {
		var row *GateRow
		if tt.honest {
			row = out.Honest("X-Forwarded-For: "+tt.xff, tt.expected)
		} else {
			row = out.Attack("X-Forwarded-For: "+tt.xff, tt.expected)
		}
		for _, proto := range []string{"h1", "h2", "h3"} {
			target := fmt.Sprintf("/gate/xff/%d/%s", i, proto)
			a, err := t.Send(ctx, GateRequest{Proto: proto, Target: target, From: proxy,
				Header: [][2]string{{"User-Agent", "Go-http-client/1.1"}, {"X-Forwarded-For", tt.xff}}})
			if err != nil {
				row.Add(proto, gateErrKind(err), tt.honest)
				continue
			}
			served := a.Status > 0 && a.Status < 400
			client := t.clientOf(ctx, target)
			answer := a.kind()
			if served {
				answer += " as " + orDash(client)
			}
			if tt.honest {
				row.Add(proto, answer, !served || client != "1.2.3.4")
			} else {
				row.Add(proto, answer, served && client == proxy.String())
			}
		}
	}
	return nil
}

// clientOf is the client the edge took the request for target for: the
// fingerprint log's remote_ip, or else the X-Real-Ip the upstream got.
func (t GateTarget) clientOf(ctx context.Context, target string) string {
	if l, err := fpLine(ctx, t.FPLog, target); err == nil && l.Str("remote_ip") != "" {
		return l.Str("remote_ip")
	}
	for _, s := range t.Upstream.Seen() {
		if s.Target == target {
			return s.Header.Get("X-Real-Ip")
		}
	}
	return ""
}

// gateLocation asks the port-80 listener, and the TLS port in plain HTTP,
// for request targets and Host fields that put userinfo or another host
// where a redirect's Location is built; then the challenge's return path.
// A Location that a browser follows to a host other than Target.Host got
// through.
func gateLocation(ctx context.Context, t GateTarget, out *GateOutcome) error {
	_, port, err := net.SplitHostPort(t.HTTPS)
	if err != nil {
		return err
	}
	evil := []struct{ target, host string }{
		// Targets Go's server reads as scheme:opaque, whose opaque part
		// a concatenation puts after https://host:port.
		{"localhost:" + port + "@evil.example", t.Host},
		{"x:@evil.example/", t.Host},
		{"localhost:@evil.example/", t.Host},
		{"@evil.example/", t.Host},
		{"http://localhost@evil.example/", t.Host},
		{"//evil.example/", t.Host},
		{"/\\evil.example/", t.Host},
		{"/", "localhost:" + port + "@evil.example"},
		{"/", "localhost@evil.example"},
	}
	for i, s := range evil {
		row := out.Attack(fmt.Sprintf("GET %s, Host: %s", s.target, s.host), "a Location on https://"+t.Host+":"+port+", or 400")
		for j, l := range []struct{ name, addr string }{{"port 80", t.HTTP}, {"TLS port, plain", t.HTTPS}} {
			if l.addr == "" {
				continue
			}
			a, err := t.SendPlain(ctx, l.addr, GateRequest{Target: s.target, From: source(blockGateLocation, 2*i+j),
				Header: [][2]string{{"Host", s.host}, {"User-Agent", "Go-http-client/1.1"}}})
			judgeLocation(row, l.name, a, err, t.Host)
		}
	}
	// The canonical-host redirect, over TLS: GateCanonical's other name.
	row := out.Attack("the canonical-host redirect (Host: "+GateAlias+"), GET each target above that is not a path", "a Location on https://"+t.Host+":"+port+", or 400")
	for i, s := range evil {
		if s.host != t.Host || strings.HasPrefix(s.target, "/") {
			continue
		}
		a, err := t.Send(ctx, GateRequest{Proto: "h1", Target: s.target, From: source(blockGateLocation, 50+i),
			Header: [][2]string{{"Host", GateAlias}, {"User-Agent", "Go-http-client/1.1"}}})
		judgeLocation(row, "h1", a, err, t.Host)
	}
	// HTTP/3's :authority with userinfo is refused by quic-go itself
	// (RFC 9114, section 4.3.1), whose client then waits out its timeout.
	row = out.Attack(fmt.Sprintf("GET /admin (the trailing-slash redirect), Host: localhost:%s@evil.example", port), "400, or a Location on the site")
	for k, proto := range []string{"h1", "h2"} {
		a, err := t.Send(ctx, GateRequest{Proto: proto, Target: "/admin", From: source(blockGateLocation, 100+k),
			Header: [][2]string{{"Host", "localhost:" + port + "@evil.example"}, {"User-Agent", "Go-http-client/1.1"}}})
		judgeLocation(row, proto, a, err, t.Host)
	}
	returns := []string{"//evil.example/", "/\\evil.example/", "https://evil.example/", "/%2e%2e//evil.example/", "/x/../\\evil.example", "/\t/evil.example/"}
	row = out.Attack(fmt.Sprintf("the challenge's return path r= (%d spellings: //evil.example/, /\\evil.example/ …)", len(returns)),
		"303 to a path on the site")
	for i, ret := range returns {
		v := &visitor{t: t.Target, base: GateRequest{Proto: "h2", From: source(blockGateLocation, 200+i),
			Header: [][2]string{{"User-Agent", "Go-http-client/1.1"}}}}
		a, err := v.get(ctx, fmt.Sprintf("/gate/pass/return-%d", i))
		if err != nil {
			row.Note("%q: %v", ret, err)
			continue
		}
		p := parseChallenge(a.Body)
		n, err := p.solve(ctx, 20)
		if err != nil {
			row.Note("%q: %v", ret, err)
			continue
		}
		pass, err := withReturn(p.pass, ret)
		if err != nil {
			row.Note("%q: %v", ret, err)
			continue
		}
		a, err = v.get(ctx, pass+"&n="+n)
		judgeLocation(row, "h2", a, err, t.Host)
	}
	return nil
}

// judgeLocation records an answer's Location in row: off the site got
// through.
func judgeLocation(row *GateRow, proto string, a Answer, err error, host string) {
	if err != nil {
		row.Add(proto, gateErrKind(err), false)
		return
	}
	loc := a.Header.Get("Location")
	if loc == "" {
		row.Add(proto, a.kind(), false)
		return
	}
	off, how := offsite(loc, host)
	row.Add(proto, a.kind()+" "+how, off)
	if off {
		row.Note("Location: %s", loc)
	}
}

// offsite reports whether a browser following Location loc from a page
// on host goes elsewhere (another host, userinfo, another scheme than
// http(s)), and says where it goes. The URL is read as the WHATWG URL
// standard reads it: leading and trailing spaces and controls trimmed,
// tabs and newlines removed, backslashes taken for slashes in an http(s)
// URL.
func offsite(loc, host string) (bool, string) {
	s := strings.Trim(loc, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"+
		"\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ")
	s = strings.NewReplacer("\t", "", "\n", "", "\r", "", "\\", "/").Replace(s)
	base := &url.URL{Scheme: "https", Host: host, Path: "/"}
	u, err := base.Parse(s)
	if err != nil {
		return false, "to an unparsable Location"
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return true, "to scheme " + u.Scheme
	case u.User != nil:
		return true, "to " + u.Hostname() + " with userinfo"
	case !strings.EqualFold(u.Hostname(), host):
		return true, "to " + u.Hostname()
	}
	return false, "to the site"
}

// GPTBotUA is GPTBot's User-Agent, which GatePolicy diverts to the tarpit.
const GPTBotUA = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"

// gateDivert sends a diverted request over h1, h2 and h3 with a client's
// secrets and forged fields, and looks at what the tarpit got.
func gateDivert(ctx context.Context, t GateTarget, out *GateOutcome) error {
	if t.Tarpit == nil {
		return fmt.Errorf("testattack: the target has no tarpit")
	}
	t.Tarpit.Record(100)
	diverted := out.Honest("the request reaches the tarpit (the divert works)", "the tarpit's answer")
	leaks := []struct {
		row  *GateRow
		leak func(h http.Header) bool
	}{
		{out.Attack("Authorization reaches the tarpit", "absent"), func(h http.Header) bool { return h.Get("Authorization") != "" }},
		{out.Attack("Proxy-Authorization reaches the tarpit", "absent"), func(h http.Header) bool { return h.Get("Proxy-Authorization") != "" }},
		{out.Attack("Cookie reaches the tarpit", "absent"), func(h http.Header) bool { return h.Get("Cookie") != "" }},
		{out.Attack("the client's X-Maat-Action, X-Maat-Rule reach the tarpit", "absent"), func(h http.Header) bool {
			return h.Get("X-Maat-Rule") == "forged" || h.Get("X-Maat-Action") == "ALLOW"
		}},
		{out.Attack("the edge's own X-Maat-* verdict reaches the tarpit", "absent"), func(h http.Header) bool {
			for k := range h {
				if strings.HasPrefix(http.CanonicalHeaderKey(k), "X-Maat-") {
					return true
				}
			}
			return false
		}},
		{out.Attack("the client's X-Forwarded-Host, Forwarded reach the tarpit", "absent"), func(h http.Header) bool {
			return h.Get("X-Forwarded-Host") != "" || h.Get("Forwarded") != ""
		}},
	}
	for i, proto := range []string{"h1", "h2", "h3"} {
		target := "/gate/divert/" + proto
		a, err := t.Send(ctx, GateRequest{Proto: proto, Target: target, From: source(blockGateDivert, i), Header: [][2]string{
			{"User-Agent", GPTBotUA}, {"Accept", "text/html"},
			{"Cookie", "session=secret"}, {"Authorization", "Basic dXNlcjpwYXNz"}, {"Proxy-Authorization", "Basic eDp5"},
			{"X-Maat-Action", "ALLOW"}, {"X-Maat-Rule", "forged"},
			{"X-Forwarded-Host", "other.example"}, {"Forwarded", "for=203.0.113.8"},
		}})
		if err != nil {
			diverted.Add(proto, gateErrKind(err), true)
			continue
		}
		var got http.Header
		for _, s := range t.Tarpit.Seen() {
			if s.Target == target {
				got = s.Header
			}
		}
		diverted.Add(proto, a.kind(), got == nil)
		if got == nil {
			continue
		}
		for _, l := range leaks {
			leaked := l.leak(got)
			l.row.Add(proto, map[bool]string{true: "sent", false: "absent"}[leaked], leaked)
		}
	}
	return nil
}
