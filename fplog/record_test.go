package fplog

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

var testTime = time.Date(2026, 12, 3, 10, 32, 8, 123456789, time.UTC)

// Records of the three protocols, each field as the edge fills it.
var protocolRecords = []struct {
	name string
	rec  Record
	want string
}{
	{
		name: "http1.1",
		rec: Record{
			Time: testTime, RemoteIP: netip.MustParseAddr("203.0.113.7"),
			Host: "example.org", Method: "GET", Path: "/feed.xml", Proto: "HTTP/1.1",
			TLSVersion: "1.3", SNI: "example.org", ALPN: "http/1.1",
			JA4: "t13d1812h1_85036bcba153_375ca2c5e164", JA4R: "t13d1812h1_002f,0035_0005,000a",
			JA4O: "t13d1812h1_e8a523a41297_6f2b0a6eab9c", JA4RO: "t13d1812h1_1301,1302_0000,0017",
			HFP: "h104_5a4e1c2d3b6f", HFPR: "host,user-agent,accept,connection",
			UserAgent: "curl/8.5.0", ClientFamily: "curl",
			Weight: 0, Rules: []string{"allow-feeds"}, Action: ActionAllow,
			Status: 200, Bytes: 5120, Duration: 1234567 * time.Nanosecond,
		},
		want: `{"time":"2026-12-03T10:32:08.123Z","remote_ip":"203.0.113.7","host":"example.org","method":"GET","path":"/feed.xml","proto":"HTTP/1.1","tls_version":"1.3","sni":"example.org","alpn":"http/1.1","ja4":"t13d1812h1_85036bcba153_375ca2c5e164","ja4_r":"t13d1812h1_002f,0035_0005,000a","ja4_o":"t13d1812h1_e8a523a41297_6f2b0a6eab9c","ja4_ro":"t13d1812h1_1301,1302_0000,0017","hfp":"h104_5a4e1c2d3b6f","hfp_r":"host,user-agent,accept,connection","user_agent":"curl/8.5.0","client_family":"curl","weight":0,"rules":["allow-feeds"],"action":"ALLOW","status":200,"bytes":5120,"duration_ms":1.235}`,
	},
	{
		name: "http2_challenge",
		rec: Record{
			Time: testTime, RequestID: "01JF3ZQ7X9T5W8M2K4R6P0B1CD", RemoteIP: netip.MustParseAddr("2001:db8::1"),
			ASN: 4200000000, ASOrg: `Example "Net" B.V.`, Country: "NL",
			Host: "wiki.example.org", Method: "GET", Path: "/w/index.php", Proto: "HTTP/2.0",
			TLSVersion: "1.3", SNI: "wiki.example.org", ALPN: "h2",
			JA4: "t13d1516h2_8daaf6152771_02713d6af862", JA4R: "r", JA4O: "o", JA4RO: "ro",
			HFP: "h217_6f1c2d9a3b4e", HFPR: ":method,:authority,:scheme,:path,user-agent",
			H2FP: "1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p", JA4H: "ge20nn14enus_7cf2b917f4b0_000000000000_000000000000",
			UserAgent: "Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0", ClientFamily: "chrome",
			Cluster: "3f9a1c0d5e7b2a64", Pressure: 0.63,
			Weight: 12, Rules: []string{"browser-ua", "no-accept-language"}, Action: ActionChallenge,
			Challenge: &Challenge{Alg: "pow", Bits: 16},
			Status:    200, Bytes: 3021, Duration: 250 * time.Microsecond,
		},
		want: `{"time":"2026-12-03T10:32:08.123Z","request_id":"01JF3ZQ7X9T5W8M2K4R6P0B1CD","remote_ip":"2001:db8::1","asn":4200000000,"as_org":"Example \"Net\" B.V.","country":"NL","host":"wiki.example.org","method":"GET","path":"/w/index.php","proto":"HTTP/2.0","tls_version":"1.3","sni":"wiki.example.org","alpn":"h2","ja4":"t13d1516h2_8daaf6152771_02713d6af862","ja4_r":"r","ja4_o":"o","ja4_ro":"ro","hfp":"h217_6f1c2d9a3b4e","hfp_r":":method,:authority,:scheme,:path,user-agent","h2fp":"1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p","ja4h":"ge20nn14enus_7cf2b917f4b0_000000000000_000000000000","user_agent":"Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0","client_family":"chrome","cluster":"3f9a1c0d5e7b2a64","pressure":0.63,"weight":12,"rules":["browser-ua","no-accept-language"],"action":"CHALLENGE","challenge":{"alg":"pow","bits":16},"status":200,"bytes":3021,"duration_ms":0.25}`,
	},
	{
		name: "http3_deny",
		rec: Record{
			Time: testTime, RemoteIP: netip.MustParseAddr("198.51.100.9"),
			Host: "git.example.org", Method: "POST", Path: "/login", Proto: "HTTP/3.0",
			TLSVersion: "1.3", SNI: "git.example.org", ALPN: "h3",
			JA4: "q13d0310h3_55b375c5d22e_cd85d2d88918", HFP: "h305_0a1b2c3d4e5f", HFPR: ":method,:scheme,:authority,:path,user-agent",
			UserAgent: "python-requests/2.31", ClientFamily: "python",
			Weight: -40, Rules: []string{"deny-scrapers"}, Action: ActionDeny,
			Status: 403, Bytes: 0, Duration: 2 * time.Second,
		},
		want: `{"time":"2026-12-03T10:32:08.123Z","remote_ip":"198.51.100.9","host":"git.example.org","method":"POST","path":"/login","proto":"HTTP/3.0","tls_version":"1.3","sni":"git.example.org","alpn":"h3","ja4":"q13d0310h3_55b375c5d22e_cd85d2d88918","hfp":"h305_0a1b2c3d4e5f","hfp_r":":method,:scheme,:authority,:path,user-agent","user_agent":"python-requests/2.31","client_family":"python","weight":-40,"rules":["deny-scrapers"],"action":"DENY","status":403,"bytes":0,"duration_ms":2000}`,
	},
	{
		name: "plain_http_no_rules",
		rec: Record{
			Time: testTime, RemoteIP: netip.MustParseAddr("192.0.2.1"),
			Host: "example.org", Method: "GET", Path: "/", Proto: "HTTP/1.1",
			HFP: "h102_aaaaaaaaaaaa", HFPR: "host,accept", Action: ActionPass, Status: 301,
		},
		want: `{"time":"2026-12-03T10:32:08.123Z","remote_ip":"192.0.2.1","host":"example.org","method":"GET","path":"/","proto":"HTTP/1.1","hfp":"h102_aaaaaaaaaaaa","hfp_r":"host,accept","weight":0,"action":"PASS","status":301,"bytes":0,"duration_ms":0}`,
	},
	{
		name: "dry_run_deny",
		rec: Record{
			Time: testTime, RemoteIP: netip.MustParseAddr("198.51.100.9"),
			Host: "example.org", Method: "GET", Path: "/wp-login.php", Proto: "HTTP/2.0",
			Weight: 0, Rules: []string{"scanner"}, Action: ActionDeny, DryRun: true, Status: 200, Bytes: 5,
		},
		want: `{"time":"2026-12-03T10:32:08.123Z","remote_ip":"198.51.100.9","host":"example.org","method":"GET","path":"/wp-login.php","proto":"HTTP/2.0","weight":0,"rules":["scanner"],"action":"DENY","dry_run":true,"status":200,"bytes":5,"duration_ms":0}`,
	},
	{
		name: "refused_bad_input",
		rec: Record{
			Time: testTime, RequestID: "1z4q8vk-5d", RemoteIP: netip.MustParseAddr("198.51.100.9"),
			Host: "example.org", Method: "GET", Path: "/a/..%2f..%2fetc", Proto: "HTTP/2.0",
			TLSVersion: "1.3", SNI: "example.org", ALPN: "h2",
			UserAgent: "curl/8.5.0", Action: ActionDeny, Reason: "bad_path", Status: 400, Bytes: 152,
		},
		want: `{"time":"2026-12-03T10:32:08.123Z","request_id":"1z4q8vk-5d","remote_ip":"198.51.100.9","host":"example.org","method":"GET","path":"/a/..%2f..%2fetc","proto":"HTTP/2.0","tls_version":"1.3","sni":"example.org","alpn":"h2","user_agent":"curl/8.5.0","weight":0,"action":"DENY","reason":"bad_path","status":400,"bytes":152,"duration_ms":0}`,
	},
}

func TestAppendJSON(t *testing.T) {
	t.Parallel()
	for _, tt := range protocolRecords {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := string(tt.rec.AppendJSON(nil))
			if got != tt.want {
				t.Fatalf("AppendJSON:\n got %s\nwant %s", got, tt.want)
			}
			if !json.Valid([]byte(got)) {
				t.Fatal("not valid JSON")
			}
		})
	}
}

func TestParseLineRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tt := range protocolRecords {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseLine([]byte(tt.want))
			if err != nil {
				t.Fatal(err)
			}
			want := tt.rec
			want.Time = want.Time.Truncate(time.Millisecond)
			want.ClientIP = want.RemoteIP.String()
			want.Duration = want.Duration.Round(time.Microsecond)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("ParseLine:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestAppendJSONStrings(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", MaxFieldBytes-1) + "é" // é straddles the limit
	tests := []struct {
		name, in, want string
	}{
		{"quote_backslash", `a"b\c`, `a"b\c`},
		{"control", "a\x00b\x1f\n\r\t", "a\x00b\x1f\n\r\t"},
		{"html", "<script>&", "<script>&"},
		{"invalid_utf8", "a\xffb\xc3", "a\ufffdb\ufffd"},
		{"line_separators", "a\u2028b\u2029", "a\u2028b\u2029"},
		{"unicode", "日本語 ✓", "日本語 ✓"},
		{"cut_at_limit", long, long[:MaxFieldBytes-1]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := (&Record{UserAgent: tt.in, Rules: []string{tt.in}}).AppendJSON(nil)
			if strings.ContainsAny(string(b), "\n\r\u2028\u2029<>&") {
				t.Fatalf("line holds a raw special character: %q", b)
			}
			r, err := ParseLine(b)
			if err != nil {
				t.Fatalf("ParseLine(%q): %v", b, err)
			}
			if r.UserAgent != tt.want || len(r.Rules) != 1 || r.Rules[0] != tt.want {
				t.Fatalf("round trip of %q = %q, %q; want %q", tt.in, r.UserAgent, r.Rules, tt.want)
			}
		})
	}
}

func TestParseLineBad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, line string
	}{
		{"empty", ""},
		{"not_json", "GET / HTTP/1.1"},
		{"array", `[1,2]`},
		{"truncated", `{"time":"2026-12-03T10:32:08.123Z","host":"exa`},
		{"bad_time", `{"time":"yesterday"}`},
		{"weight_not_int", `{"weight":1.5}`},
		{"weight_string", `{"weight":"12"}`},
		{"rules_not_array", `{"rules":"a"}`},
		{"duration_huge", `{"duration_ms":1e300}`},
		{"too_long", `{"path":"` + strings.Repeat("a", MaxLineBytes) + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := ParseLine([]byte(tt.line)); !errors.Is(err, ErrBadLine) {
				t.Fatalf("ParseLine error = %v; want ErrBadLine", err)
			}
		})
	}
}

func TestParseLineLenient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, line string
		want       Record
	}{
		{"unknown_fields_ignored", `{"action":"DENY","future":{"x":1}}`, Record{Action: "DENY"}},
		{"hashed_ip", `{"remote_ip":"3f9ac0ffee00112233445566"}`, Record{ClientIP: "3f9ac0ffee00112233445566"}},
		{"prefix_ip", `{"remote_ip":"203.0.113.0/24"}`, Record{ClientIP: "203.0.113.0/24"}},
		{"offset_time", `{"time":"2026-12-03T11:32:08.123456+01:00"}`, Record{Time: time.Date(2026, 12, 3, 10, 32, 8, 123e6, time.UTC)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseLine([]byte(tt.line))
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseLine = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestParseLinePrefixes(t *testing.T) {
	t.Parallel()
	for _, tt := range protocolRecords {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for n := range len(tt.want) {
				if _, err := ParseLine([]byte(tt.want[:n])); !errors.Is(err, ErrBadLine) {
					t.Fatalf("ParseLine of the %d-byte prefix error = %v; want ErrBadLine", n, err)
				}
			}
		})
	}
}

// jsonString is encoding/json's encoding of s, with HTML escaping, as
// appendString writes it: \b and \f spelled \u0008 and \u000c.
func jsonString(t testing.TB, s string) string {
	t.Helper()
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	out := strings.TrimSuffix(buf.String(), "\n")
	return strings.NewReplacer(`\\`, `\\`, `\b`, `\u0008`, `\f`, `\u000c`).Replace(out)
}

// TestAppendStringEncodingJSON compares appendString with encoding/json on
// every byte that JSON, HTML or UTF-8 treats specially, at every position of
// strings around the eight-byte words that appendString scans at once.
func TestAppendStringEncodingJSON(t *testing.T) {
	t.Parallel()
	specials := []string{
		"\x00", "\x01", "\b", "\t", "\n", "\f", "\r", "\x1f", "\x7f", `"`, `\`, "<", ">", "&",
		"\x80", "\xff", "\xc3", "é", "\u2028", "\u2029", "日", "\U0001F600", "\xf0\x9f\x98",
		" ", "~", "!", "#", "=", "?", "@", "[", "]",
	}
	n := 0
	for size := range 20 {
		for _, sp := range specials {
			for pos := 0; pos <= size; pos++ {
				s := strings.Repeat("a", pos) + sp + strings.Repeat("b", size-pos)
				if got, want := string(appendString(nil, s)), jsonString(t, s); got != want {
					t.Fatalf("appendString(%q) = %s; encoding/json gives %s", s, got, want)
				}
				n++
			}
		}
	}
	t.Logf("%d strings", n)
}

// TestAppendMillis compares appendMillis with the float formatting it
// replaces, on edges and on random durations of every magnitude. Beyond 2^53
// nanoseconds a float64 no longer holds them exactly: there the line must
// read back as the duration.
func TestAppendMillis(t *testing.T) {
	t.Parallel()
	ds := []time.Duration{
		0, 1, 499, 500, 999, time.Microsecond, 10 * time.Microsecond, 250 * time.Microsecond,
		time.Millisecond, 1234567, 1230 * time.Microsecond, 1205 * time.Microsecond, 2 * time.Second,
		-1, -500, -501, -250 * time.Microsecond, -1234567, 1<<53 - 1, 1 << 53, -(1 << 53),
		805768251524258765, math.MaxInt64, math.MinInt64, math.MinInt64 + 1,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		ds = append(ds, time.Duration(rng.Int64N(math.MaxInt64)>>rng.IntN(63)))
		ds = append(ds, -time.Duration(rng.Int64N(1<<40)))
	}
	for _, d := range ds {
		got := string(appendMillis(nil, d))
		us := d.Round(time.Microsecond) / time.Microsecond
		if d > -(1<<53) && d < 1<<53 {
			if want := strconv.FormatFloat(float64(us*time.Microsecond)/1e6, 'f', -1, 64); got != want {
				t.Fatalf("appendMillis(%d) = %s; want %s", int64(d), got, want)
			}
		}
		r, err := ParseLine([]byte(`{"duration_ms":` + got + `}`))
		if math.Abs(float64(us)) < maxDurationMS*1e3 && (err != nil || r.Duration != us*time.Microsecond) {
			t.Fatalf("appendMillis(%d) = %s, read back as %v, %v; want %v", int64(d), got, r.Duration, err, us*time.Microsecond)
		}
	}
}

func TestAppendTime(t *testing.T) {
	t.Parallel()
	for _, tm := range []time.Time{
		testTime, {}, time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.FixedZone("CET", 3600)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(999, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got, want := string(appendTime(nil, tm)), tm.UTC().Format(timeLayout); got != want {
			t.Errorf("appendTime(%v) = %s; want %s", tm, got, want)
		}
	}
}
