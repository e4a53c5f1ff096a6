// Package fplogfuzz holds the fuzz targets of package fplog: the line
// decoder, which reads log files of untrusted content, and the encoder, which
// writes what clients send.
package fplogfuzz

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/maatproxy/maat/fplog"
)

var seedLines = []string{
	`{"time":"2026-12-03T10:32:08.123Z","remote_ip":"203.0.113.7","host":"example.org","method":"GET","path":"/feed.xml","proto":"HTTP/1.1","tls_version":"1.3","sni":"example.org","alpn":"http/1.1","ja4":"t13d1812h1_85036bcba153_375ca2c5e164","hfp":"h104_5a4e1c2d3b6f","hfp_r":"host,user-agent,accept,connection","user_agent":"curl/8.5.0","client_family":"curl","weight":0,"rules":["allow-feeds"],"action":"ALLOW","status":200,"bytes":5120,"duration_ms":1.235}`,
	`{"time":"2026-12-03T10:32:08.123Z","remote_ip":"2001:db8::/64","proto":"HTTP/2.0","h2fp":"1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p","weight":12,"rules":["a","b"],"action":"CHALLENGE","challenge":{"alg":"pow","bits":16},"status":200,"bytes":3021,"duration_ms":0.25}`,
	`{"remote_ip":"3f9ac0ffee00112233445566","action":"DENY","weight":-40,"duration_ms":2000}`,
	`{"time":"2026-12-03T10:32:08.123Z","request_id":"1z4q8vk-5d","method":"GET","path":"/a/..%2fb","proto":"HTTP/1.1","weight":0,"action":"DENY","reason":"bad_path","status":400,"bytes":152,"duration_ms":0.1}`,
	`{"reason":"\u0000\"","action":""}`,
	`{"time":"2026-12-03T10:32:08.123Z","request_id":"01JF3ZQ7X9T5W8M2K4R6P0B1CD","remote_ip":"2001:db8::1","asn":4294967295,"as_org":"Example \"Net\"","country":"NL","weight":0,"bytes":0,"duration_ms":0}`,
	`{"asn":0,"as_org":"","country":"","request_id":""}`,
	`{"asn":-1}`,
	`{"asn":4294967296}`,
	`{"user_agent":"\u0000\u2028\ud800<>&\"\\","path":"/\u00e9"}`,
	`{"time":"0001-01-01T00:00:00.0005Z"}`,
	`{"time":"9999-12-31T23:59:59.999-01:00"}`,
	`{"duration_ms":-0.0004,"weight":9223372036854775807,"bytes":-1}`,
	`{"rules":[],"challenge":null,"TIME":"2026-12-03T10:32:08Z"}`,
	`{"cluster":"3f9a1c0d5e7b2a64","pressure":0.625,"weight":0,"action":"PASS"}`,
	`{"pressure":0.994999}`,
	`{"pressure":-0}`,
	`{"pressure":1.5}`,
	`{"pressure":1e-9,"cluster":""}`,
	`{"a":1`,
	`garbage`,
}

// FuzzParseLine checks that a parsed line encodes to a valid line that
// parses back to itself: encoding is a fixed point after one round.
func FuzzParseLine(f *testing.F) {
	for _, s := range seedLines {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := fplog.ParseLine(data)
		if err != nil {
			return
		}
		line := r.AppendJSON(nil)
		if !json.Valid(line) || bytes.ContainsAny(line, "\n\r") {
			t.Fatalf("AppendJSON of a parsed line is not one valid JSON line: %q", line)
		}
		r2, err := fplog.ParseLine(line)
		if err != nil {
			t.Fatalf("ParseLine(%q) after a round: %v", line, err)
		}
		if again := r2.AppendJSON(nil); !bytes.Equal(again, line) {
			t.Fatalf("not a fixed point:\n%s\n%s", line, again)
		}
	})
}

// FuzzAppendJSON checks that what clients send (user agent, path, host)
// always gives one valid JSON line that returns the same values.
func FuzzAppendJSON(f *testing.F) {
	f.Add("Mozilla/5.0", "/", "example.org", "rule", 12, int64(2048), int64(1500000))
	f.Add("\x00\xff\xfe", "/a\nb\r\"c\\", "<script>", "\u2028", -5, int64(0), int64(-1))
	f.Add(strings.Repeat("é", 3000), "", "", "", 0, int64(math.MaxInt64), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, ua, path, host, rule string, weight int, n, dur int64) {
		r := fplog.Record{
			Time: time.Unix(1764757928, 123e6).UTC(), UserAgent: ua, Path: path, Host: host,
			Rules: []string{rule}, Weight: weight, Bytes: n, Duration: time.Duration(dur % 1e18),
		}
		line := r.AppendJSON(nil)
		if !json.Valid(line) || bytes.ContainsAny(line, "\n\r") {
			t.Fatalf("not one valid JSON line: %q", line)
		}
		got, err := fplog.ParseLine(line)
		if err != nil {
			t.Fatalf("ParseLine(%q): %v", line, err)
		}
		for _, c := range []struct{ name, in, out string }{
			{"user_agent", ua, got.UserAgent}, {"path", path, got.Path}, {"host", host, got.Host},
		} {
			if utf8.ValidString(c.in) && len(c.in) <= fplog.MaxFieldBytes && c.in != c.out {
				t.Errorf("%s %q came back as %q", c.name, c.in, c.out)
			}
			if len(c.out) > fplog.MaxFieldBytes+2*utf8.UTFMax*fplog.MaxFieldBytes {
				t.Errorf("%s came back %d bytes long", c.name, len(c.out))
			}
		}
		if got.Weight != weight || got.Bytes != n || got.Duration != r.Duration.Round(time.Microsecond) {
			t.Errorf("numbers came back as %d, %d, %v; want %d, %d, %v", got.Weight, got.Bytes, got.Duration, weight, n, r.Duration.Round(time.Microsecond))
		}
	})
}

// FuzzCounterRead checks that the reader of untrusted log files counts every
// non-blank line, as a record or as a bad line, and never fails on plain
// input.
func FuzzCounterRead(f *testing.F) {
	f.Add([]byte(strings.Join(seedLines, "\n")))
	f.Add([]byte("\n\n  \r\n{}\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
			return // gzip; covered by the package's tests
		}
		c, err := fplog.NewCounter(fplog.TopOptions{By: "rule"})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Read(bytes.NewReader(data)); err != nil {
			t.Fatalf("Read: %v", err)
		}
		lines := 0
		for l := range bytes.SplitSeq(data, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				lines++
			}
		}
		if got := c.Records() + c.Bad(); got != int64(lines) {
			t.Fatalf("records %d + bad %d = %d; want the %d non-blank lines", c.Records(), c.Bad(), got, lines)
		}
	})
}

// FuzzAppendJSONString compares the encoder's JSON strings with
// encoding/json's (HTML escaping on, \b and \f spelled \u0008 and \u000c):
// a differential check of the word-at-a-time scan.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain words", "12345678<", "1234567\"", "\x00\x1f\x7f\x80\xff", "é\u2028日\U0001F600", "\xf0\x9f\x98", strings.Repeat("ab", 40) + "&"} {
		f.Add(s)
	}
	const prefix, suffix = `{"user_agent":`, `,"weight":0,"bytes":0,"duration_ms":0}`
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > fplog.MaxFieldBytes {
			return // cut first; the package's tests cover cutting
		}
		line := string((&fplog.Record{UserAgent: s}).AppendJSON(nil))
		if s == "" {
			return // left out
		}
		if !strings.HasPrefix(line, prefix) || !strings.HasSuffix(line, suffix) {
			t.Fatalf("line %q", line)
		}
		got := line[len(prefix) : len(line)-len(suffix)]
		var buf bytes.Buffer
		if err := json.NewEncoder(&buf).Encode(s); err != nil {
			t.Fatal(err)
		}
		want := strings.NewReplacer(`\\`, `\\`, `\b`, `\u0008`, `\f`, `\u000c`).Replace(strings.TrimSuffix(buf.String(), "\n"))
		if got != want {
			t.Fatalf("%q encoded as %s; encoding/json gives %s", s, got, want)
		}
	})
}
