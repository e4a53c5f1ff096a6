package fplogfuzz

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/internal/testgoaccess"
)

// logItem is a field as a combined line should hold it: "-" when empty,
// else cut to MaxFieldBytes at a character start.
func logItem(s string) string {
	if s == "" {
		return "-"
	}
	if len(s) > fplog.MaxFieldBytes {
		n := fplog.MaxFieldBytes
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s
}

// FuzzAppendCombined checks that whatever a client sends as User-Agent,
// Referer, request target or user name, a combined line stays one line that
// GoAccess's COMBINED format splits into the fields that were written, and
// that the \xHH escapes give back the bytes sent.
func FuzzAppendCombined(f *testing.F) {
	f.Add("Mozilla/5.0", "https://example.org/", "/?q=1", "alice", 200, int64(5120))
	f.Add(`"`, `\`, `/a"b\c d`, `x [01/Jan/2020:00:00:00 +0000] "`, 404, int64(0))
	f.Add("a\n192.0.2.66 - - [03/Dec/2026:10:32:08 +0000] \"GET / HTTP/1.1\" 404 0 \"-\" \"-\"", "\r\n", "\x00\x7f\xff", "", 0, int64(-1))
	f.Add("é ☃ \u2028", `\x22`, strings.Repeat(`"\`, 3000), "]", 1000, int64(1))
	f.Fuzz(func(t *testing.T, ua, referer, uri, user string, status int, n int64) {
		r := fplog.AccessRecord{
			Time: time.Unix(1764757928, 123e6), RemoteIP: netip.MustParseAddr("2001:db8::7"), User: user,
			Method: "GET", URI: uri, Proto: "HTTP/2.0", Status: status, Bytes: n, Referer: referer, UserAgent: ua,
		}
		line := string(r.AppendCombined(nil))
		if strings.ContainsAny(line, "\r\n") {
			t.Fatalf("a line break in %q", line)
		}
		tok, err := testgoaccess.Split(testgoaccess.Combined, line)
		if err != nil {
			t.Fatalf("GoAccess cannot read %q: %v", line, err)
		}
		wantStatus := fmt.Sprintf("%03d", status)
		if status < 0 || status > 999 {
			wantStatus = "000"
		}
		wantBytes := "-"
		if n > 0 {
			wantBytes = strconv.FormatInt(n, 10)
		}
		wantRequest := "GET " + logItem(uri) + " HTTP/2.0"
		if uri == "" {
			wantRequest = "GET HTTP/2.0"
		}
		for _, c := range []struct{ spec, got, want string }{
			{"%h", tok["h"], "2001:db8::7"},
			{"%^ (user)", testgoaccess.Unescape(strings.TrimSuffix(tok["^1"], " ")), "- " + logItem(user)},
			{"%d", tok["d"], "03/Dec/2025"},
			{"%t", tok["t"], "10:32:08"},
			{"%^ (zone)", tok["^2"], "+0000"},
			{"%r", testgoaccess.Unescape(tok["r"]), wantRequest},
			{"%s", tok["s"], wantStatus},
			{"%b", tok["b"], wantBytes},
			{"%R", testgoaccess.Unescape(tok["R"]), logItem(referer)},
			{"%u", testgoaccess.Unescape(tok["u"]), logItem(ua)},
		} {
			if c.got != c.want {
				t.Errorf("%s = %q; want %q in %q", c.spec, c.got, c.want, line)
			}
		}
	})
}
