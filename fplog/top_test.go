package fplog

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
)

// generated returns record i of the generated log: of each ten records,
// five have JA4 aaa (four ALLOW, one CHALLENGE, rule r1), three bbb (DENY,
// rules r1 and r2), one ccc (ALLOW, no rule) and one none (RATE, rule r2
// twice). The first 500 are two hours old.
func generated(i int) Record {
	r := Record{Time: testTime, Proto: "HTTP/2.0"}
	if i < 500 {
		r.Time = testTime.Add(-2 * time.Hour)
	}
	switch k := i % 10; {
	case k < 5:
		r.JA4, r.Action, r.Rules = "t13d1516h2_aaa", ActionAllow, []string{"r1"}
		if k == 4 {
			r.Action = ActionChallenge
		}
	case k < 8:
		r.JA4, r.Action, r.Rules = "t13d1715h2_bbb", ActionDeny, []string{"r1", "r2"}
	case k == 8:
		r.JA4, r.Action = "q13d0310h3_ccc", ActionAllow
	default:
		r.Action, r.Rules = ActionRate, []string{"r2", "r2"}
	}
	return r
}

// generatedLog writes records 0 to 599 and some bad lines to a plain file,
// and records 600 to 999 to a gzip file.
func generatedLog(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	var plain, gz bytes.Buffer
	for i := range 1000 {
		r := generated(i)
		if i < 600 {
			plain.Write(append(r.AppendJSON(nil), '\n'))
		} else {
			gz.Write(append(r.AppendJSON(nil), '\r', '\n'))
		}
		if i == 300 {
			plain.WriteString("garbage\n\n   \n")
			plain.WriteString(`{"weight":"x"}` + "\n")
			plain.WriteString(`{"path":"` + strings.Repeat("a", MaxLineBytes) + "\"}\n")
		}
	}
	plain.WriteString(`{"truncated":`) // the last line, cut by a crash
	a := filepath.Join(dir, "fp.jsonl")
	b := filepath.Join(dir, "fp-2026-12-03T10-00-00.000.jsonl.gz")
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	zw.Write(gz.Bytes())
	zw.Close()
	if err := os.WriteFile(a, plain.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, zbuf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{a, b}
}

func TestTop(t *testing.T) {
	t.Parallel()
	files := generatedLog(t)
	tests := []struct {
		name string
		opts TopOptions
		want []TopRow
	}{
		{"ja4", TopOptions{}, []TopRow{
			{"t13d1516h2_aaa", 500, 0.5, map[string]int64{"ALLOW": 400, "CHALLENGE": 100}},
			{"t13d1715h2_bbb", 300, 0.3, map[string]int64{"DENY": 300}},
			{"", 100, 0.1, map[string]int64{"RATE": 100}},
			{"q13d0310h3_ccc", 100, 0.1, map[string]int64{"ALLOW": 100}},
		}},
		{"ja4_limit", TopOptions{By: "ja4", Limit: 2}, []TopRow{
			{"t13d1516h2_aaa", 500, 0.5, map[string]int64{"ALLOW": 400, "CHALLENGE": 100}},
			{"t13d1715h2_bbb", 300, 0.3, map[string]int64{"DENY": 300}},
		}},
		{"rule", TopOptions{By: "rule"}, []TopRow{
			{"r1", 800, 0.8, map[string]int64{"ALLOW": 400, "CHALLENGE": 100, "DENY": 300}},
			{"r2", 400, 0.4, map[string]int64{"DENY": 300, "RATE": 100}},
			{"", 100, 0.1, map[string]int64{"ALLOW": 100}},
		}},
		{"action_since", TopOptions{By: "action", Since: testTime.Add(-time.Hour)}, []TopRow{
			{"ALLOW", 250, 0.5, map[string]int64{"ALLOW": 250}},
			{"DENY", 150, 0.3, map[string]int64{"DENY": 150}},
			{"CHALLENGE", 50, 0.1, map[string]int64{"CHALLENGE": 50}},
			{"RATE", 50, 0.1, map[string]int64{"RATE": 50}},
		}},
		{"proto", TopOptions{By: "proto", Limit: -1}, []TopRow{
			{"HTTP/2.0", 1000, 1, map[string]int64{"ALLOW": 500, "CHALLENGE": 100, "DENY": 300, "RATE": 100}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Top(files, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Top:\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestCounterBadLines(t *testing.T) {
	t.Parallel()
	files := generatedLog(t)
	c, err := NewCounter(TopOptions{Since: testTime.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := c.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	// garbage, a weight that is no number, a line too long, a cut last line
	if c.Records() != 500 || c.Old() != 500 || c.Bad() != 4 {
		t.Fatalf("Records, Old, Bad = %d, %d, %d; want 500, 500, 4", c.Records(), c.Old(), c.Bad())
	}
}

func TestTopErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt.jsonl.gz")
	os.WriteFile(corrupt, []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 1, 2, 3}, 0o600)
	tests := []struct {
		name    string
		files   []string
		opts    TopOptions
		wantErr error
	}{
		{"unknown_by", nil, TopOptions{By: "cookie"}, ErrUnknownBy},
		{"missing_file", []string{filepath.Join(dir, "missing")}, TopOptions{}, os.ErrNotExist},
		{"corrupt_gzip", []string{corrupt}, TopOptions{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Top(tt.files, tt.opts)
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Fatalf("Top error = %v; want %v", err, cmpOr(tt.wantErr, "an error"))
			}
		})
	}
}

func cmpOr(err error, s string) any {
	if err != nil {
		return err
	}
	return s
}

func TestWriteTopTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rows []TopRow
		want string
	}{
		{"rows", []TopRow{
			{"t13d1516h2_aaa", 500, 0.5, map[string]int64{"ALLOW": 400, "CHALLENGE": 100}},
			{"", 100, 0.1, map[string]int64{"RATE": 100}},
		}, "" +
			"COUNT  SHARE  VALUE           ACTIONS\n" +
			"500    50.0%  t13d1516h2_aaa  ALLOW 400, CHALLENGE 100\n" +
			"100    10.0%  (none)          RATE 100\n"},
		{"terminal_escapes_quoted", []TopRow{
			{"\x1b[31mred\tx", 1, 1, map[string]int64{"\x1b]0;": 1}},
		}, "" +
			"COUNT  SHARE   VALUE" + strings.Repeat(" ", 13) + "ACTIONS\n" +
			"1      100.0%  \"\\x1b[31mred\\tx\"  \"\\x1b]0;\" 1\n"},
		{"long_value_cut", []TopRow{
			{strings.Repeat("é", 150), 1, 1, map[string]int64{"DENY": 1}},
		}, "" +
			"COUNT  SHARE   VALUE" + strings.Repeat(" ", 97) + "ACTIONS\n" +
			"1      100.0%  " + strings.Repeat("é", 99) + "…  DENY 1\n"},
		{"empty", nil, "COUNT  SHARE  VALUE  ACTIONS\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			if err := WriteTopTable(&buf, tt.rows); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Fatalf("table:\n%s\nwant:\n%s", buf.String(), tt.want)
			}
		})
	}
}

func TestWriteTopJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rows []TopRow
	}{
		{"rows", []TopRow{{"t13d1516h2_aaa", 500, 0.5, map[string]int64{"ALLOW": 400, "CHALLENGE": 100}}}},
		{"empty", []TopRow{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			if err := WriteTopJSON(&buf, tt.rows); err != nil {
				t.Fatal(err)
			}
			var got []TopRow
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.rows) {
				t.Fatalf("JSON round trip = %v; want %v", got, tt.rows)
			}
		})
	}
}

// writtenLog writes a day of requests with fplog's own Writer, as the edge
// does, and returns the file: per hour h (0 to 23, the oldest first), ten
// requests from AS 64500 in NL to /feed.xml allowed (200), five from AS
// 64501 in US to /wp-login.php denied by rules scanner and php (403) and,
// every fourth hour, one without geo data to /, challenged by rule
// no-accept-language (403).
func writtenLog(t *testing.T, now time.Time) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fp.jsonl")
	w, err := NewWriter(Config{Path: path, QueueSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	for h := range 24 {
		at := now.Add(time.Duration(h-24) * time.Hour)
		for range 10 {
			w.Write(&Record{Time: at, RequestID: "a", ASN: 64500, ASOrg: "Example NL", Country: "NL",
				Path: "/feed.xml", Action: ActionAllow, Rules: []string{"feeds"}, Status: 200})
		}
		for range 5 {
			w.Write(&Record{Time: at, RequestID: "b", ASN: 64501, ASOrg: "Example US", Country: "US",
				Path: "/wp-login.php", Action: ActionDeny, Rules: []string{"scanner", "php"}, Status: 403})
		}
		if h%4 == 0 {
			w.Write(&Record{Time: at, Path: "/", Action: ActionChallenge, Rules: []string{"no-accept-language"},
				Challenge: &Challenge{Alg: "pow", Bits: 16}, Status: 403})
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Written() != 24*15+6 || w.Dropped() != 0 {
		t.Fatalf("Written, Dropped = %d, %d", w.Written(), w.Dropped())
	}
	return path
}

func TestTopWrittenLog(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	path := writtenLog(t, now)
	since6h := now.Add(-6*time.Hour - time.Minute) // hours 18 to 23: six of them, hour 20 with a challenge
	allow := func(n int64) map[string]int64 { return map[string]int64{ActionAllow: n} }
	deny := func(n int64) map[string]int64 { return map[string]int64{ActionDeny: n} }
	chal := func(n int64) map[string]int64 { return map[string]int64{ActionChallenge: n} }
	tests := []struct {
		name string
		opts TopOptions
		want []TopRow
	}{
		{"path", TopOptions{By: "path"}, []TopRow{
			{"/feed.xml", 240, 240.0 / 366, allow(240)},
			{"/wp-login.php", 120, 120.0 / 366, deny(120)},
			{"/", 6, 6.0 / 366, chal(6)},
		}},
		{"status", TopOptions{By: "status"}, []TopRow{
			{"200", 240, 240.0 / 366, allow(240)},
			{"403", 126, 126.0 / 366, map[string]int64{ActionDeny: 120, ActionChallenge: 6}},
		}},
		{"action", TopOptions{By: "action"}, []TopRow{
			{ActionAllow, 240, 240.0 / 366, allow(240)},
			{ActionDeny, 120, 120.0 / 366, deny(120)},
			{ActionChallenge, 6, 6.0 / 366, chal(6)},
		}},
		{"rule_each", TopOptions{By: "rule"}, []TopRow{
			{"feeds", 240, 240.0 / 366, allow(240)},
			{"php", 120, 120.0 / 366, deny(120)},
			{"scanner", 120, 120.0 / 366, deny(120)},
			{"no-accept-language", 6, 6.0 / 366, chal(6)},
		}},
		{"asn", TopOptions{By: "asn"}, []TopRow{
			{"64500", 240, 240.0 / 366, allow(240)},
			{"64501", 120, 120.0 / 366, deny(120)},
			{"", 6, 6.0 / 366, chal(6)},
		}},
		{"as_org", TopOptions{By: "as_org", Limit: 1}, []TopRow{
			{"Example NL", 240, 240.0 / 366, allow(240)},
		}},
		{"country_since", TopOptions{By: "country", Since: since6h}, []TopRow{
			{"NL", 60, 60.0 / 91, allow(60)},
			{"US", 30, 30.0 / 91, deny(30)},
			{"", 1, 1.0 / 91, chal(1)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Top([]string{path}, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Top:\n got %v\nwant %v", got, tt.want)
			}
			// The same from the standard input, named "-" (twice: read
			// once).
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			opts := tt.opts
			opts.Stdin = f
			got, err = Top([]string{"-", "-"}, opts)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Top of stdin = %v, %v\nwant %v", got, err, tt.want)
			}
		})
	}
}

// TestTopStdinAndFiles: "-" among files adds the standard input's lines
// to theirs, gzipped or not.
func TestTopStdinAndFiles(t *testing.T) {
	t.Parallel()
	files := generatedLog(t) // 1000 records, 500 of JA4 aaa
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	for range 7 {
		zw.Write(append((&Record{JA4: "t13d1516h2_aaa", Action: ActionAllow}).AppendJSON(nil), '\n'))
	}
	zw.Close()
	got, err := Top(append(files, "-"), TopOptions{Limit: 1, Stdin: &gz})
	if err != nil {
		t.Fatal(err)
	}
	want := []TopRow{{"t13d1516h2_aaa", 507, 507.0 / 1007, map[string]int64{"ALLOW": 407, "CHALLENGE": 100}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Top = %v; want %v", got, want)
	}
}

func TestByFields(t *testing.T) {
	t.Parallel()
	fields := ByFields()
	for _, by := range []string{"ja4", "hfp", "h2fp", "ua", "family", "ip", "path", "status", "action", "reason", "rule", "asn", "country"} {
		if !slices.Contains(fields, by) {
			t.Errorf("ByFields() = %q lacks %q", fields, by)
		}
		if _, err := NewCounter(TopOptions{By: by}); err != nil {
			t.Errorf("NewCounter(By: %q): %v", by, err)
		}
	}
	if !slices.IsSorted(fields) {
		t.Errorf("ByFields() = %q, not sorted", fields)
	}
}

// TestTopByJA4Session counts a resumed session's requests under the JA4
// of its full handshake, the one the policy judged them by, and the
// others under their hello's.
func TestTopByJA4Session(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	for _, r := range []Record{
		{JA4: "t13d1516h2_full", Action: ActionAllow},
		{JA4: "t13d1517h2_resumed", JA4Session: "t13d1516h2_full", Resumed: true, Action: ActionAllow},
		{JA4: "t13d1517h2_resumed", JA4Session: "t13d1516h2_full", Resumed: true, Action: ActionRate},
		{JA4: "t13d0912h1_other", Action: ActionDeny},
	} {
		b.Write(append(r.AppendJSON(nil), '\n'))
	}
	path := filepath.Join(t.TempDir(), "fp.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Top([]string{path}, TopOptions{By: "ja4_session"})
	if err != nil {
		t.Fatal(err)
	}
	want := []TopRow{
		{"t13d1516h2_full", 3, 3.0 / 4, map[string]int64{ActionAllow: 2, ActionRate: 1}},
		{"t13d0912h1_other", 1, 1.0 / 4, map[string]int64{ActionDeny: 1}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Top by ja4_session = %v; want %v", got, want)
	}
}

// TestTopByReason counts why the edge refused requests itself; records the
// site or the policy answered count as "".
func TestTopByReason(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	for _, r := range []Record{
		{Action: ActionDeny, Reason: "bad_path", Status: 400},
		{Action: ActionDeny, Reason: "method_not_allowed", Status: 405},
		{Action: ActionDeny, Reason: "bad_path", Status: 400},
		{Action: ActionAllow, Status: 200},
		{Action: ActionDeny, Rules: []string{"scanner"}, Status: 403},
		{Action: ActionAllow, Reason: "upstream_timeout", Status: 504},
		{Action: ActionDeny, Reason: "bad_path", Status: 400},
	} {
		b.Write(append(r.AppendJSON(nil), '\n'))
	}
	path := filepath.Join(t.TempDir(), "fp.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Top([]string{path}, TopOptions{By: "reason"})
	if err != nil {
		t.Fatal(err)
	}
	want := []TopRow{
		{"bad_path", 3, 3.0 / 7, map[string]int64{ActionDeny: 3}},
		{"", 2, 2.0 / 7, map[string]int64{ActionAllow: 1, ActionDeny: 1}},
		{"method_not_allowed", 1, 1.0 / 7, map[string]int64{ActionDeny: 1}},
		{"upstream_timeout", 1, 1.0 / 7, map[string]int64{ActionAllow: 1}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Top by reason = %v; want %v", got, want)
	}
}

// TestTopFilters: Host and Action count only the records of that host
// (without case or port) and action (without case); the others are
// counted as filtered.
func TestTopFilters(t *testing.T) {
	t.Parallel()
	recs := []Record{
		{Host: "a.test", Action: ActionDeny, JA4: "j1"},
		{Host: "A.test:443", Action: ActionDeny, JA4: "j1"},
		{Host: "a.test", Action: ActionAllow, JA4: "j2"},
		{Host: "b.test", Action: ActionDeny, JA4: "j3"},
		{Host: "[2001:db8::1]:8443", Action: ActionChallenge, JA4: "j4"},
	}
	for _, tt := range []struct {
		name     string
		opts     TopOptions
		want     map[string]int64
		filtered int64
	}{
		{"host", TopOptions{Host: "a.test"}, map[string]int64{"j1": 2, "j2": 1}, 2},
		{"host with port and case", TopOptions{Host: "A.TEST:8443"}, map[string]int64{"j1": 2, "j2": 1}, 2},
		{"action", TopOptions{Action: "deny"}, map[string]int64{"j1": 2, "j3": 1}, 2},
		{"both", TopOptions{Host: "a.test", Action: "ALLOW"}, map[string]int64{"j2": 1}, 4},
		{"IPv6 host", TopOptions{Host: "2001:db8::1"}, map[string]int64{"j4": 1}, 4},
		{"no match", TopOptions{Host: "c.test"}, map[string]int64{}, 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := NewCounter(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range recs {
				c.Add(&recs[i])
			}
			got := map[string]int64{}
			for _, r := range c.Rows(-1) {
				got[r.Value] = r.Count
			}
			if !reflect.DeepEqual(got, tt.want) || c.Filtered() != tt.filtered || c.Records() != int64(len(recs))-tt.filtered {
				t.Errorf("rows %v, filtered %d, records %d; want %v, %d", got, c.Filtered(), c.Records(), tt.want, tt.filtered)
			}
		})
	}
}

// TestTopRuleSpellings: a rule and the signal it is named for are one row
// of -by rule, whichever spelling each record has and in whatever order
// the records come, and a record with both counts once.
func TestTopRuleSpellings(t *testing.T) {
	t.Parallel()
	recs := []Record{
		{Rules: []string{"fake_crawler"}, Action: ActionDeny},
		{Rules: []string{"fake-crawler", "fake_crawler"}, Action: ActionDeny},
		{Rules: []string{"no-admin"}, Action: ActionDeny},
	}
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}} {
		c, err := NewCounter(TopOptions{By: "rule"})
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range order {
			c.Add(&recs[i])
		}
		rows := c.Rows(-1)
		if len(rows) != 2 || rows[0].Value != "fake-crawler" || rows[0].Count != 2 || rows[0].Actions[ActionDeny] != 2 ||
			rows[1].Value != "no-admin" || rows[1].Count != 1 {
			t.Errorf("order %v: rows %+v; want fake-crawler 2, no-admin 1", order, rows)
		}
	}
}
