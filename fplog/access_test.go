package fplog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/maatproxy/maat/internal/testgoaccess"
)

// accessRecords are requests as the edge fills them, with their combined
// lines as nginx would write them.
var accessRecords = []struct {
	name     string
	rec      AccessRecord
	combined string
}{
	{
		name: "get",
		rec: AccessRecord{
			Time: testTime, RemoteIP: netip.MustParseAddr("203.0.113.7"),
			Method: "GET", URI: "/feed.xml?page=2&sort=new", Proto: "HTTP/1.1", Status: 200, Bytes: 5120,
			Referer: "https://example.org/", UserAgent: "curl/8.5.0", Host: "example.org", Duration: 1234567,
			RequestID: "01JF3ZQ7X9T5W8M2K4R6P0B1CD",
		},
		combined: `203.0.113.7 - - [03/Dec/2026:10:32:08 +0000] "GET /feed.xml?page=2&sort=new HTTP/1.1" 200 5120 "https://example.org/" "curl/8.5.0"`,
	},
	{
		name: "http2_user_not_found",
		rec: AccessRecord{
			Time: testTime, RemoteIP: netip.MustParseAddr("2001:db8::1"), User: "alice",
			Method: "POST", URI: "/wp-login.php", Proto: "HTTP/2.0", Status: 404,
			UserAgent: "Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0", Host: "wiki.example.org",
		},
		combined: `2001:db8::1 - alice [03/Dec/2026:10:32:08 +0000] "POST /wp-login.php HTTP/2.0" 404 - "-" "Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0"`,
	},
	{
		name: "http3_head_empty",
		rec: AccessRecord{
			Time: testTime, RemoteIP: netip.MustParseAddr("::ffff:198.51.100.9"),
			Method: "HEAD", URI: "/", Proto: "HTTP/3.0", Status: 304,
		},
		combined: `198.51.100.9 - - [03/Dec/2026:10:32:08 +0000] "HEAD / HTTP/3.0" 304 - "-" "-"`,
	},
	{
		name: "hostile",
		rec: AccessRecord{
			Time: testTime, RemoteIP: netip.MustParseAddr("192.0.2.1"), User: `x [01/Jan/2020:00:00:00 +0000] "`,
			Method: "GET", URI: `/a"b\c` + "\x00\t", Proto: "HTTP/1.1", Status: 200, Bytes: 1,
			Referer:   "\"\r\n10.0.0.1 - - [03/Dec/2026:10:32:08 +0000] \"GET / HTTP/1.1\" 404 0 \"-\" \"",
			UserAgent: "é\xff\x7f\\\"",
		},
		combined: `192.0.2.1 - x\x20\x5B01/Jan/2020:00:00:00\x20+0000\x5D\x20\x22 [03/Dec/2026:10:32:08 +0000] "GET /a\x22b\x5Cc\x00\x09 HTTP/1.1" 200 1 "\x22\x0D\x0A10.0.0.1 - - [03/Dec/2026:10:32:08 +0000] \x22GET / HTTP/1.1\x22 404 0 \x22-\x22 \x22" "\xC3\xA9\xFF\x7F\x5C\x22"`,
	},
	{
		name:     "nothing",
		rec:      AccessRecord{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))},
		combined: `- - - [02/Jan/2026:02:04:05 +0000] "-" 000 - "-" "-"`,
	},
}

func TestAccessCombined(t *testing.T) {
	t.Parallel()
	for _, tt := range accessRecords {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := string(tt.rec.AppendCombined(nil)); got != tt.combined {
				t.Errorf("AppendCombined:\n%s\nwant:\n%s", got, tt.combined)
			}
		})
	}
}

// goaccessLine is what GoAccess takes from a line: the request split into
// method, URI and protocol, and nginx's \xHH escapes decoded.
type goaccessLine struct {
	host, method, uri, proto, referer, agent string
	time                                     time.Time
	status                                   int
	bytes                                    int64
}

// parseGoAccess reads a line as GoAccess reads it with its COMBINED
// format (testgoaccess.Split); the host must be an address (GoAccess
// validates it).
func parseGoAccess(line string) (goaccessLine, error) {
	tokens, err := testgoaccess.Split(testgoaccess.Combined, line)
	if err != nil {
		return goaccessLine{}, err
	}
	var l goaccessLine
	if _, err := netip.ParseAddr(tokens["h"]); err != nil {
		return l, fmt.Errorf("%%h: %w", err)
	}
	l.host = tokens["h"]
	if l.time, err = time.Parse("02/Jan/2006 15:04:05", tokens["d"]+" "+tokens["t"]); err != nil {
		return l, err
	}
	if len(tokens["s"]) != 3 {
		return l, fmt.Errorf("%%s %q", tokens["s"])
	}
	if l.status, err = strconv.Atoi(tokens["s"]); err != nil {
		return l, err
	}
	if b := tokens["b"]; b != "-" {
		if l.bytes, err = strconv.ParseInt(b, 10, 64); err != nil {
			return l, err
		}
	}
	req := testgoaccess.Unescape(tokens["r"])
	if sp := strings.IndexByte(req, ' '); sp >= 0 {
		l.method, req = req[:sp], req[sp+1:]
		if sp := strings.LastIndexByte(req, ' '); sp >= 0 {
			req, l.proto = req[:sp], req[sp+1:]
		}
	}
	l.uri = req
	l.referer, l.agent = testgoaccess.Unescape(tokens["R"]), testgoaccess.Unescape(tokens["u"])
	return l, nil
}

// hostileAgents are User-Agents sent to break a log reader.
var hostileAgents = []string{
	`"`, `\`, `\"`, `" 404 "`, "\n", "\r\n",
	"a\n192.0.2.66 - - [03/Dec/2026:10:32:08 +0000] \"GET /admin HTTP/1.1\" 404 0 \"-\" \"-\"",
	"\x00\x1b[31mred\x1b[0m", "é ☃ \u2028", "\xff\xfe", strings.Repeat(`"\`, 3000),
}

func TestAccessGoAccess(t *testing.T) {
	t.Parallel()
	var recs []AccessRecord
	for _, tt := range accessRecords {
		recs = append(recs, tt.rec)
	}
	for i, ua := range hostileAgents {
		recs = append(recs, AccessRecord{
			Time: testTime, RemoteIP: netip.MustParseAddr("192.0.2.1"), Method: "GET",
			URI: fmt.Sprintf("/%d?q=%s", i, ua), Proto: "HTTP/1.1", Status: 200 + i, Bytes: int64(i),
			Referer: ua, UserAgent: ua,
		})
	}
	var buf bytes.Buffer
	w, err := NewAccessWriter(AccessConfig{Output: &buf})
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		w.Write(&recs[i])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(recs) {
		t.Fatalf("%d lines for %d records:\n%s", len(lines), len(recs), buf.String())
	}
	for i, line := range lines {
		r := recs[i]
		if !r.RemoteIP.IsValid() {
			continue // GoAccess refuses "-" without --no-ip-validation
		}
		got, err := parseGoAccess(line)
		if err != nil {
			t.Errorf("GoAccess cannot read line %d: %v\n%s", i, err, line)
			continue
		}
		orDash := func(s string) string {
			if s == "" {
				return "-"
			}
			return cut(s)
		}
		want := goaccessLine{
			host: r.RemoteIP.Unmap().String(), method: r.Method, uri: cut(r.URI), proto: r.Proto,
			referer: orDash(r.Referer), agent: orDash(r.UserAgent),
			time: r.Time.UTC().Truncate(time.Second), status: r.Status, bytes: r.Bytes,
		}
		if got != want {
			t.Errorf("line %d read back as\n%+v\nwant\n%+v\n%s", i, got, want, line)
		}
	}
}

func TestAccessFail2ban(t *testing.T) {
	t.Parallel()
	// fail2ban's nginx filters: ^<HOST> -.*"(GET|POST|HEAD).*HTTP.*" 404,
	// with <HOST> an address.
	failregex := regexp.MustCompile(`^(?P<host>[0-9A-Fa-f.:]+) -.*"(GET|POST|HEAD).*HTTP.*" 404`)
	hostile := "\n192.0.2.66 - - [03/Dec/2026:10:32:08 +0000] \"GET /admin HTTP/1.1\" 404 0 \"-\" \"-\""
	tests := []struct {
		name, method, uri, ua string
		status                int
		want                  string // the host found, "" for no match
	}{
		{"get_404", "GET", "/wp-login.php", "curl/8.5.0", 404, "203.0.113.7"},
		{"post_404", "POST", "/xmlrpc.php", "", 404, "203.0.113.7"},
		{"head_404", "HEAD", "/.env", "x", 404, "203.0.113.7"},
		{"get_200", "GET", "/", "curl/8.5.0", 200, ""},
		{"propfind_404", "PROPFIND", "/", "", 404, ""},
		{"forged_404_in_agent", "GET", "/", `HTTP/1.1" 404 0`, 200, ""},
		{"forged_line_in_agent", "GET", "/", hostile, 200, ""},
		{"forged_404_in_uri", "GET", `/" 404 "`, "", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := AccessRecord{
				Time: testTime, RemoteIP: netip.MustParseAddr("203.0.113.7"), Method: tt.method,
				URI: tt.uri, Proto: "HTTP/1.1", Status: tt.status, UserAgent: tt.ua, Referer: tt.ua,
			}
			line := string(r.AppendCombined(nil))
			var got string
			if m := failregex.FindStringSubmatch(line); m != nil {
				got = m[1]
			}
			if got != tt.want {
				t.Errorf("failregex found %q; want %q in\n%s", got, tt.want, line)
			}
			if strings.ContainsAny(line, "\r\n") {
				t.Errorf("line holds a line break: %q", line)
			}
		})
	}
}

// fail2banLine is a line as fail2ban's failregexes see it: the date found
// by the datepattern is cut out, leaving "[]".
func fail2banLine(line string) string {
	lb, rb := strings.IndexByte(line, '['), strings.IndexByte(line, ']')
	if lb < 0 || rb < lb {
		return line
	}
	return line[:lb+1] + line[rb:]
}

// TestAccessCombinedFail2banFilters runs the failregexes of fail2ban's
// filters for web access logs (config/filter.d, <HOST> an address) on
// combined lines: each matches the line it is written for. A request ID
// appended after the User-Agent, as nginx's "main" format appends a field,
// would still be read by GoAccess and by nginx-botsearch, but http-badbots
// (and apache-badbots, which fail2ban's docs set on nginx too) anchor the
// User-Agent at the end of the line: that is why combined lines carry no
// request ID.
func TestAccessCombinedFail2banFilters(t *testing.T) {
	t.Parallel()
	const host = `(?P<host>[0-9A-Fa-f.:]+)`
	filters := map[string]*regexp.Regexp{
		// nginx-botsearch.conf, with a part of botsearch-common.conf's <block>
		"nginx-botsearch": regexp.MustCompile(`^` + host + ` \- \S+ \[\] \"(GET|POST|HEAD) \/\/?(?:wp-login\.php|cgi-bin|mysqladmin)[^,]* \S+\" 404 .+$`),
		// nginx-bad-request.conf
		"nginx-bad-request": regexp.MustCompile(`^` + host + ` - \S+ \[\] "[^"]*" 400`),
		// http-badbots.conf, with two of its bots
		"http-badbots": regexp.MustCompile(`^` + host + ` - \S+ \[\] "([A-Z]+) \S+ HTTP[^"]+" \d+ \d+ "[^"]*" "(?:EmailSiphon|psycheclone)"$`),
	}
	tests := []struct {
		name, filter string
		rec          AccessRecord
	}{
		{"botsearch", "nginx-botsearch", AccessRecord{Method: "GET", URI: "/wp-login.php", Status: 404, Bytes: 153}},
		{"botsearch_empty_body", "nginx-botsearch", AccessRecord{Method: "HEAD", URI: "/cgi-bin/x", Status: 404}},
		{"bad_request", "nginx-bad-request", AccessRecord{Status: 400}},
		{"bad_request_garbage", "nginx-bad-request", AccessRecord{Method: "\x16\x03\x01", Status: 400}},
		{"badbots", "http-badbots", AccessRecord{Method: "GET", URI: "/contact", Status: 200, Bytes: 5120, UserAgent: "EmailSiphon"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := tt.rec
			r.Time, r.RemoteIP, r.RequestID = testTime, netip.MustParseAddr("203.0.113.7"), "01JF3ZQ7X9T5W8M2K4R6P0B1CD"
			if r.Method != "" {
				r.Proto = "HTTP/1.1"
			}
			line := string(r.AppendCombined(nil))
			if strings.Contains(line, r.RequestID) {
				t.Fatalf("combined line holds the request ID: %s", line)
			}
			re := filters[tt.filter]
			if m := re.FindStringSubmatch(fail2banLine(line)); m == nil || m[1] != "203.0.113.7" {
				t.Fatalf("%s finds %q in\n%s", tt.filter, m, line)
			}
			if _, err := parseGoAccess(line); err != nil {
				t.Fatalf("GoAccess cannot read %s: %v", line, err)
			}
			// The line nginx's "main" format would give, the ID appended.
			appended := line + ` "` + r.RequestID + `"`
			if _, err := parseGoAccess(appended); err != nil {
				t.Errorf("GoAccess cannot read %s: %v", appended, err)
			}
			if matched := re.MatchString(fail2banLine(appended)); matched != (tt.filter != "http-badbots") {
				t.Errorf("%s with the ID appended: match %v", tt.filter, matched)
			}
		})
	}
}

// accessJSON is an access log line as encoding/json reads it.
type accessJSON struct {
	Time       string  `json:"time"`
	RequestID  string  `json:"request_id"`
	RemoteIP   string  `json:"remote_ip"`
	User       string  `json:"user"`
	Host       string  `json:"host"`
	Method     string  `json:"method"`
	URI        string  `json:"uri"`
	Proto      string  `json:"proto"`
	Status     int     `json:"status"`
	Bytes      int64   `json:"bytes"`
	Referer    string  `json:"referer"`
	UserAgent  string  `json:"user_agent"`
	DurationMS float64 `json:"duration_ms"`
}

func TestAccessJSON(t *testing.T) {
	t.Parallel()
	var recs []AccessRecord
	for _, tt := range accessRecords {
		recs = append(recs, tt.rec)
	}
	for _, ua := range hostileAgents {
		r := accessRecords[0].rec
		r.UserAgent, r.Referer, r.URI = ua, ua, "/?"+ua
		recs = append(recs, r)
	}
	var buf bytes.Buffer
	w, err := NewAccessWriter(AccessConfig{Output: &buf, Format: FormatJSON})
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		w.Write(&recs[i])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, MaxLineBytes)
	i := 0
	for ; sc.Scan(); i++ {
		want := recs[i]
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		var l accessJSON
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %d: %v\n%s", i, err, sc.Bytes())
		}
		tm, err := time.Parse(time.RFC3339Nano, l.Time)
		if err != nil || !tm.Equal(want.Time.Truncate(time.Millisecond)) {
			t.Errorf("line %d: time %q; want %v", i, l.Time, want.Time)
		}
		ip := ""
		if want.RemoteIP.IsValid() {
			ip = want.RemoteIP.Unmap().String()
		}
		valid := func(s string) string { // each invalid byte replaced, as appendString does
			var b strings.Builder
			for _, r := range cut(s) {
				b.WriteRune(r)
			}
			return b.String()
		}
		wantLine := accessJSON{
			Time: l.Time, RequestID: want.RequestID, RemoteIP: ip, User: valid(want.User), Host: want.Host, Method: want.Method,
			URI: valid(want.URI), Proto: want.Proto, Status: want.Status, Bytes: want.Bytes,
			Referer: valid(want.Referer), UserAgent: valid(want.UserAgent),
			DurationMS: float64(want.Duration.Round(time.Microsecond)) / 1e6,
		}
		if l != wantLine {
			t.Errorf("line %d read back as\n%+v\nwant\n%+v", i, l, wantLine)
		}
	}
	if i != len(recs) {
		t.Fatalf("%d lines for %d records", i, len(recs))
	}
}

func TestAccessJSONLine(t *testing.T) {
	t.Parallel()
	r := accessRecords[0].rec
	r.User = "alice"
	const want = `{"time":"2026-12-03T10:32:08.123Z","request_id":"01JF3ZQ7X9T5W8M2K4R6P0B1CD","remote_ip":"203.0.113.7","user":"alice","host":"example.org","method":"GET","uri":"/feed.xml?page=2\u0026sort=new","proto":"HTTP/1.1","status":200,"bytes":5120,"referer":"https://example.org/","user_agent":"curl/8.5.0","duration_ms":1.235}`
	if got := string(r.AppendJSON(nil)); got != want {
		t.Errorf("AppendJSON:\n%s\nwant:\n%s", got, want)
	}
}

func TestAccessPrivacy(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	hash := regexp.MustCompile(`^[0-9a-f]{24}$`)
	tests := []struct {
		name, mode, addr string
		combined, json   string // "HASH" = 24 hex digits; json "" = left out
	}{
		{"full_v4", ClientIPFull, "203.0.113.7", "203.0.113.7", "203.0.113.7"},
		{"full_v6", "", "2001:db8::1", "2001:db8::1", "2001:db8::1"},
		{"prefix_v4", ClientIPPrefix, "203.0.113.7", "203.0.113.0", "203.0.113.0/24"},
		{"prefix_v6", ClientIPPrefix, "2001:db8:1:2:3:4:5:6", "2001:db8:1:2::", "2001:db8:1:2::/64"},
		{"prefix_mapped", ClientIPPrefix, "::ffff:203.0.113.7", "203.0.113.0", "203.0.113.0/24"},
		{"hash", ClientIPHash, "203.0.113.7", "HASH", "HASH"},
		{"none", ClientIPNone, "203.0.113.7", "-", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := map[string]string{}
			for _, format := range []string{FormatCombined, FormatJSON} {
				var buf bytes.Buffer
				w, err := NewAccessWriter(AccessConfig{Output: &buf, Format: format, ClientIP: tt.mode, HashKey: key})
				if err != nil {
					t.Fatal(err)
				}
				w.Write(&AccessRecord{Time: testTime, RemoteIP: netip.MustParseAddr(tt.addr), Method: "GET", URI: "/", Proto: "HTTP/1.1", Status: 200})
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				line := buf.String()
				if tt.mode != ClientIPFull && tt.mode != "" && strings.Contains(line, tt.addr) {
					t.Errorf("%s line holds the address: %s", format, line)
				}
				if format == FormatCombined {
					got[format], _, _ = strings.Cut(line, " ")
					continue
				}
				var l accessJSON
				if err := json.Unmarshal(buf.Bytes(), &l); err != nil {
					t.Fatal(err)
				}
				got[format] = l.RemoteIP
			}
			for format, want := range map[string]string{FormatCombined: tt.combined, FormatJSON: tt.json} {
				if want == "HASH" && hash.MatchString(got[format]) {
					continue
				}
				if got[format] != want {
					t.Errorf("%s client address = %q; want %q", format, got[format], want)
				}
			}
			if tt.mode == ClientIPHash && got[FormatCombined] != got[FormatJSON] {
				t.Errorf("hashes differ: %s, %s", got[FormatCombined], got[FormatJSON])
			}
		})
	}
}

// readAccessLog returns the lines of an access log file, gzipped or not.
func readAccessLog(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(name, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(data) > 1<<20 {
		t.Errorf("%s holds %d bytes; want at most 1 MiB", name, len(data))
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func TestAccessRotation(t *testing.T) {
	t.Parallel()
	const n, keep = 5000, 2
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	w, err := NewAccessWriter(AccessConfig{Path: path, MaxSizeMB: 1, MaxFiles: keep, QueueSize: n, ClientIP: ClientIPPrefix})
	if err != nil {
		t.Fatal(err)
	}
	ua := strings.Repeat("x", 900) // lines of about 1 KiB: 5 MiB in all
	for i := range n {
		w.Write(&AccessRecord{Time: testTime, RemoteIP: netip.MustParseAddr("203.0.113.7"), Method: "GET", URI: fmt.Sprint("/", i), Proto: "HTTP/1.1", Status: 200, UserAgent: ua})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Written() != n || w.Dropped() != 0 || w.Err() != nil {
		t.Fatalf("Written, Dropped, Err = %d, %d, %v; want %d, 0, nil", w.Written(), w.Dropped(), w.Err(), n)
	}
	rotated, err := filepath.Glob(filepath.Join(dir, "access-*.log.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(rotated) != keep || len(entries) != keep+1 {
		t.Fatalf("rotated %v of %d files; want %d and the log", rotated, len(entries), keep)
	}
	slices.Sort(rotated)
	var seq []int
	for _, name := range append(rotated, path) {
		for _, line := range readAccessLog(t, name) {
			l, err := parseGoAccess(line)
			if err != nil || l.host != "203.0.113.0" {
				t.Fatalf("%s: host %q, %v", name, l.host, err)
			}
			i, _ := strconv.Atoi(strings.TrimPrefix(l.uri, "/"))
			seq = append(seq, i)
		}
	}
	for j, i := range seq {
		if want := n - len(seq) + j; i != want {
			t.Fatalf("line %d of the kept files is record %d; want %d", j, i, want)
		}
	}
	if len(seq) < 2<<10 {
		t.Fatalf("kept %d lines; want at least two full files", len(seq))
	}
}

func TestAccessReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	w, err := NewAccessWriter(AccessConfig{Path: path, Format: FormatJSON})
	if err != nil {
		t.Fatal(err)
	}
	rec := accessRecords[0].rec
	for range 10 {
		w.Write(&rec)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := w.Reopen(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		w.Write(&rec)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close error = %v; want ErrClosed", err)
	}
	w.Write(&rec)
	if w.Dropped() != 1 {
		t.Errorf("Dropped after a Write after Close = %d; want 1", w.Dropped())
	}
	for name, want := range map[string]int{path + ".1": 10, path: 5} {
		if lines := readAccessLog(t, name); len(lines) != want {
			t.Errorf("%s holds %d lines; want %d", name, len(lines), want)
		}
	}
}

func TestAccessWriterBlockedOutput(t *testing.T) {
	t.Parallel()
	const queue, n = 16, 10000
	out := &blockedWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	w, err := NewAccessWriter(AccessConfig{Output: out, QueueSize: queue})
	if err != nil {
		t.Fatal(err)
	}
	rec := accessRecords[0].rec
	w.Write(&rec)
	<-out.entered
	for range n {
		w.Write(&rec) // must return at once: the test hangs otherwise
	}
	if got := w.Dropped(); got != n-queue {
		t.Errorf("Dropped = %d; want %d (all but the queue)", got, n-queue)
	}
	close(out.release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := w.Written(); got != 1+queue {
		t.Errorf("Written = %d; want %d", got, 1+queue)
	}
}

func TestAccessWriterStampsTime(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w, err := NewAccessWriter(AccessConfig{Output: &buf, Format: FormatJSON})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Truncate(time.Millisecond)
	w.Write(&AccessRecord{Method: "GET"})
	w.Close()
	var l accessJSON
	if err := json.Unmarshal(buf.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	if tm, err := time.Parse(time.RFC3339Nano, l.Time); err != nil || tm.Before(before) || tm.After(time.Now()) {
		t.Fatalf("time of a record written without one = %q, %v; want about now", l.Time, err)
	}
}

func TestAccessConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cfg      AccessConfig
		problems int
	}{
		{"minimal", AccessConfig{Path: "access.log"}, 0},
		{"full", AccessConfig{Path: "-", Format: FormatJSON, MaxSizeMB: 10, MaxFiles: 3, QueueSize: 100, ClientIP: ClientIPHash, HashKey: make([]byte, 32)}, 0},
		{"combined", AccessConfig{Path: "-", Format: FormatCombined}, 0},
		{"no_path", AccessConfig{}, 1},
		{"bad_format", AccessConfig{Path: "-", Format: "common"}, 1},
		{"everything_wrong", AccessConfig{Format: "clf", MaxSizeMB: -1, MaxFiles: -2, QueueSize: -3, ClientIP: ClientIPHash}, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			var n int
			if err != nil {
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("Validate error %v does not wrap ErrConfig", err)
				}
				n = len(err.(interface{ Unwrap() []error }).Unwrap())
			}
			if n != tt.problems {
				t.Fatalf("Validate = %v: %d problems; want %d", err, n, tt.problems)
			}
			if tt.problems == 0 {
				return
			}
			if _, err := NewAccessWriter(tt.cfg); !errors.Is(err, ErrConfig) {
				t.Fatalf("NewAccessWriter error = %v; want ErrConfig", err)
			}
		})
	}
}

// BenchmarkAccessWrite measures the caller's side of Write, as
// BenchmarkWrite does for the fingerprint log: "queued" holds the writing
// goroutine in its output so that every record takes the queue; "saturated"
// lets it encode on another core.
func BenchmarkAccessWrite(b *testing.B) {
	rec := accessRecords[0].rec
	noTime := rec
	noTime.Time = time.Time{}
	benchmarks := []struct {
		name     string
		rec      AccessRecord
		format   string
		queued   bool
		parallel bool
	}{
		{"queued", rec, FormatCombined, true, false},
		{"queued_no_time", noTime, FormatCombined, true, false},
		{"saturated_combined", rec, FormatCombined, false, false},
		{"saturated_json", rec, FormatJSON, false, false},
		{"saturated_parallel", rec, FormatCombined, false, true},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			benchWrite(b, bm.rec, bm.queued, bm.parallel, func(out io.Writer, queue int) (*sink[AccessRecord], func(*AccessRecord), error) {
				w, err := NewAccessWriter(AccessConfig{Output: out, QueueSize: queue, Format: bm.format})
				if err != nil {
					return nil, nil, err
				}
				return &w.sink, w.Write, nil
			})
		})
	}
}

func BenchmarkAppendCombined(b *testing.B) {
	r := accessRecords[0].rec
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendCombined(buf[:0])
	}
}

func TestAppendCombinedTime(t *testing.T) {
	t.Parallel()
	for _, tm := range []time.Time{
		testTime, {}, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got, want := string(appendCombinedTime(nil, tm)), tm.Format(combinedTimeLayout); got != want {
			t.Errorf("appendCombinedTime(%v) = %q; want %q", tm, got, want)
		}
	}
}
