package fplog_test

import (
	"net/netip"
	"os"
	"time"

	"github.com/maatproxy/maat/fplog"
)

func Example() {
	// Path: "/var/log/edge/fp.jsonl" in production; the standard output here.
	w, err := fplog.NewWriter(fplog.Config{Output: os.Stdout, ClientIP: fplog.ClientIPPrefix})
	if err != nil {
		panic(err)
	}
	w.Write(&fplog.Record{
		Time:      time.Date(2026, 12, 3, 10, 32, 8, 123e6, time.UTC),
		RemoteIP:  netip.MustParseAddr("203.0.113.7"),
		Host:      "example.org",
		Method:    "GET",
		Path:      "/",
		Proto:     "HTTP/2.0",
		JA4:       "t13d1516h2_8daaf6152771_02713d6af862",
		UserAgent: "Mozilla/5.0",
		Weight:    10,
		Rules:     []string{"browser-ua"},
		Action:    fplog.ActionChallenge,
		Challenge: &fplog.Challenge{Alg: "pow", Bits: 16},
		Status:    200,
		Bytes:     2048,
		Duration:  1500 * time.Microsecond,
	})
	w.Close() // flushes
	// Output:
	// {"time":"2026-12-03T10:32:08.123Z","remote_ip":"203.0.113.0/24","host":"example.org","method":"GET","path":"/","proto":"HTTP/2.0","ja4":"t13d1516h2_8daaf6152771_02713d6af862","user_agent":"Mozilla/5.0","weight":10,"rules":["browser-ua"],"action":"CHALLENGE","challenge":{"alg":"pow","bits":16},"status":200,"bytes":2048,"duration_ms":1.5}
}

func ExampleTop() {
	dir, _ := os.MkdirTemp("", "fplog")
	defer os.RemoveAll(dir)
	log := dir + "/fp.jsonl"
	os.WriteFile(log, []byte(""+
		`{"ja4":"t13d1516h2_aaa","action":"ALLOW"}`+"\n"+
		`{"ja4":"t13d1516h2_aaa","action":"CHALLENGE"}`+"\n"+
		`{"ja4":"t13d0912h1_bbb","action":"DENY"}`+"\n"), 0o600)

	rows, err := fplog.Top([]string{log}, fplog.TopOptions{By: "ja4"})
	if err != nil {
		panic(err)
	}
	fplog.WriteTopTable(os.Stdout, rows)
	// Output:
	// COUNT  SHARE  VALUE           ACTIONS
	// 2      66.7%  t13d1516h2_aaa  ALLOW 1, CHALLENGE 1
	// 1      33.3%  t13d0912h1_bbb  DENY 1
}

func ExampleAccessWriter() {
	// Path: "/var/log/edge/access.log" in production; the standard output here.
	w, err := fplog.NewAccessWriter(fplog.AccessConfig{Output: os.Stdout, Format: fplog.FormatCombined})
	if err != nil {
		panic(err)
	}
	w.Write(&fplog.AccessRecord{
		Time:      time.Date(2026, 12, 3, 10, 32, 8, 123e6, time.UTC),
		RemoteIP:  netip.MustParseAddr("203.0.113.7"),
		Method:    "GET",
		URI:       "/feed.xml?page=2",
		Proto:     "HTTP/2.0",
		Status:    200,
		Bytes:     5120,
		Referer:   "https://example.org/",
		UserAgent: `Mozilla/5.0 "quoted"`,
		Host:      "example.org",
		Duration:  1500 * time.Microsecond,
	})
	w.Close() // flushes
	// Output:
	// 203.0.113.7 - - [03/Dec/2026:10:32:08 +0000] "GET /feed.xml?page=2 HTTP/2.0" 200 5120 "https://example.org/" "Mozilla/5.0 \x22quoted\x22"
}
