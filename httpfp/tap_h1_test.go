package httpfp

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// drain returns the fingerprints queued on c, oldest first.
func drain(c *Conn) []*pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queue
	c.queue = nil
	return q
}

func TestH1Tap(t *testing.T) {
	t.Parallel()
	type want struct {
		method, uri string
		names       string // comma-joined, original case
	}
	tests := []struct {
		name  string
		wire  string
		want  []want
		err   error
		after string // fed after wire; must not yield more requests
	}{
		{
			name: "get",
			wire: "GET /a?b=1 HTTP/1.1\r\nHost: x\r\nUser-Agent: curl\r\nX-A: 1\r\nX-B: 2\r\n\r\n",
			want: []want{{"GET", "/a?b=1", "Host,User-Agent,X-A,X-B"}},
		},
		{
			name: "pipelined with bodies",
			wire: "POST /1 HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nGET / HTTP/\r\n" +
				"POST /2 HTTP/1.1\r\ntransfer-encoding: chunked\r\nHost: x\r\n\r\n" +
				"5;ext=1\r\nGET /\r\n0\r\nX-Trailer: 1\r\n\r\n" +
				"GET /3 HTTP/1.1\r\nhost: x\r\nCookie: a=b\r\n\r\n",
			want: []want{
				{"POST", "/1", "Host,Content-Length"},
				{"POST", "/2", "transfer-encoding,Host"},
				{"GET", "/3", "host,Cookie"},
			},
		},
		{
			name: "expect continue",
			wire: "PUT /f HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\nGET \r\n" +
				"GET /g HTTP/1.1\r\nHost: x\r\n\r\n",
			want: []want{{"PUT", "/f", "Host,Expect,Content-Length"}, {"GET", "/g", "Host"}},
		},
		{
			name: "bare LF, obs-fold, empty lines between",
			wire: "GET /x HTTP/1.0\nHost: x\nX-Long: a\n b\n\tc\nAccept: */*\n\n\r\n\r\nHEAD / HTTP/1.1\r\nHost: y\r\n\r\n",
			want: []want{{"GET", "/x", "Host,X-Long,Accept"}, {"HEAD", "/", "Host"}},
		},
		{
			name: "chunk sizes in hex and upper case",
			wire: "POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\nA\r\n0123456789\r\n1f\r\n" +
				strings.Repeat("x", 31) + "\r\n0\r\n\r\nGET /n HTTP/1.1\r\n\r\n",
			want: []want{{"POST", "/", "Transfer-Encoding"}, {"GET", "/n", ""}},
		},
		{
			name:  "upgrade stops the tap",
			wire:  "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
			want:  []want{{"GET", "/ws", "Host,Connection,Upgrade"}},
			after: "\x81\x85GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		},
		{
			name:  "connect stops the tap",
			wire:  "CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n",
			want:  []want{{"CONNECT", "x:443", "Host"}},
			after: "\x16\x03\x01GET / HTTP/1.1\r\n\r\n",
		},
		{
			name: "conflicting content lengths",
			wire: "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
			err:  ErrMalformed,
		},
		{
			name: "gzip transfer coding",
			wire: "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
			err:  ErrMalformed,
		},
		{
			name: "not HTTP",
			wire: "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 ab\n",
			err:  ErrMalformed,
		},
		{
			name: "line without colon",
			wire: "GET / HTTP/1.1\r\nHost x\r\n\r\n",
			err:  ErrMalformed,
		},
		{
			name: "bad chunk",
			wire: "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
			want: []want{{"POST", "/", "Transfer-Encoding"}},
			err:  ErrMalformed,
		},
		{
			name: "header too large",
			wire: "GET / HTTP/1.1\r\nX: " + strings.Repeat("a", DefaultMaxHeaderBytes+4096) + "\r\n\r\n",
			err:  ErrTooLarge,
		},
	}
	for _, tt := range tests {
		for _, step := range []int{1, 7, len(tt.wire)} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				c := NewConn(nil, H1, Config{})
				for w := tt.wire; len(w) > 0; {
					n := min(step, len(w))
					c.feed([]byte(w[:n]))
					w = w[n:]
				}
				c.feed([]byte(tt.after))
				if !errors.Is(c.Err(), tt.err) || (tt.err == nil) != (c.Err() == nil) {
					t.Fatalf("Err() = %v, want %v", c.Err(), tt.err)
				}
				got := drain(c)
				if len(got) != len(tt.want) {
					t.Fatalf("got %d requests, want %d", len(got), len(tt.want))
				}
				for i, w := range tt.want {
					g := got[i]
					if g.method != w.method || g.uri != w.uri || strings.Join(g.fp.Names, ",") != w.names {
						t.Errorf("request %d = %s %s %q, want %s %s %q", i, g.method, g.uri, g.fp.Names, w.method, w.uri, w.names)
					}
					if hfp, raw := specHFP(H1, g.fp.Names); g.fp.HFP != hfp || g.fp.HFPR != raw || !g.fp.Ordered {
						t.Errorf("request %d: hfp %s %q, want %s %q", i, g.fp.HFP, g.fp.HFPR, hfp, raw)
					}
				}
			})
		}
	}
}

func TestH1TapJA4H(t *testing.T) {
	t.Parallel()
	wire := "GET /p HTTP/1.1\r\nHost: example.org\r\nUser-Agent: Mozilla/5.0\r\nAccept: */*\r\n" +
		"Accept-Language: da, en-gb;q=0.8\r\nCookie: yummy_cookie=choco\r\nCookie: tasty_cookie=strawberry\r\nReferer: https://example.org/\r\n\r\n"
	tests := []struct {
		name      string
		cfg       Config
		ja4h      string
		wantJA4HR bool
	}{
		{"off", Config{}, "", false},
		{"on", Config{JA4H: true}, "ge11cr04da00_8ddaef5d77af_280f366eaa04_c2fb0fe53442", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := NewConn(nil, H1, tt.cfg)
			c.feed([]byte(wire))
			fp, ok := c.take(&http.Request{Method: "GET", RequestURI: "/p"})
			if !ok {
				t.Fatal("no fingerprint")
			}
			if fp.JA4H != tt.ja4h || (fp.JA4HR != "") != tt.wantJA4HR {
				t.Errorf("JA4H = %q, JA4HR = %q; want %q", fp.JA4H, fp.JA4HR, tt.ja4h)
			}
			if fp.HFPR != "host,user-agent,accept,accept-language" {
				t.Errorf("HFPR = %q", fp.HFPR)
			}
		})
	}
}

func TestTakeH1(t *testing.T) {
	t.Parallel()
	wire := "GET /1 HTTP/1.1\r\nA: 1\r\n\r\nOPTIONS * HTTP/1.1\r\nB: 1\r\n\r\nGET /1 HTTP/1.1\r\nC: 1\r\n\r\nGET /2 HTTP/1.1\r\nD: 1\r\n\r\n"
	tests := []struct {
		name string
		reqs []string // method uri of the requests handlers see, in order
		want []string // the first name of each fingerprint, "" for none
	}{
		{"all in order", []string{"GET /1", "OPTIONS *", "GET /1", "GET /2"}, []string{"A", "B", "C", "D"}},
		{"options answered by the server", []string{"GET /1", "GET /1", "GET /2"}, []string{"A", "C", "D"}},
		{"one not asked", []string{"GET /1", "GET /2"}, []string{"A", "D"}},
		{"unknown request", []string{"GET /3", "GET /1"}, []string{"", "A"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := NewConn(nil, H1, Config{})
			c.feed([]byte(wire))
			var got []string
			for _, r := range tt.reqs {
				m, u, _ := strings.Cut(r, " ")
				fp, ok := c.take(&http.Request{Method: m, RequestURI: u})
				if !ok {
					got = append(got, "")
					continue
				}
				got = append(got, fp.Names[0])
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPendingBounds(t *testing.T) {
	t.Parallel()
	small := "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	big := "GET / HTTP/1.1\r\n" + strings.Repeat("X-Long-Name-"+strings.Repeat("n", 200)+": 1\r\n", 4) + "\r\n"
	tests := []struct {
		name     string
		cfg      Config
		wire     string
		pending  int
		maxBytes int
	}{
		{"count", Config{}, strings.Repeat(small, 300), maxPending, 2 * DefaultMaxHeaderBytes},
		{"bytes", Config{MaxHeaderBytes: 4096}, strings.Repeat(big, 100), 4, 8192},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := NewConn(nil, H1, tt.cfg)
			c.feed([]byte(tt.wire))
			if err := c.Err(); err != nil {
				t.Fatal(err)
			}
			if n := c.Pending(); n != tt.pending {
				t.Errorf("Pending() = %d, want %d", n, tt.pending)
			}
			if c.queued > tt.maxBytes {
				t.Errorf("queued %d bytes, want at most %d", c.queued, tt.maxBytes)
			}
		})
	}
}

// TestH1TapAmbiguousLength: a request with Transfer-Encoding and
// Content-Length (in any case, order and value), or with Transfer-Encoding
// in HTTP/1.0, is marked; one with either alone in HTTP/1.1 is not, and
// the mark does not carry over to the next request.
func TestH1TapAmbiguousLength(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		head string // up to the empty line
		body string // as the tap reads it: chunked, by length, or none in HTTP/1.0
		want bool
	}{
		{"chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n", false},
		{"length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n", "hello", false},
		{"both", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n", true},
		{"both, coding first, other case", "POST / HTTP/1.1\r\ntransfer-encoding: CHUNKED\r\nCONTENT-LENGTH: 5\r\n", "0\r\n\r\n", true},
		{"both, length 0", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n", "0\r\n\r\n", true},
		{"both, coding folded", "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding:\r\n chunked\r\n", "0\r\n\r\n", true},
		{"coding in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n", "", true},
		{"both in HTTP/1.0", "POST / HTTP/1.0\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n", "hello", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := NewConn(nil, H1, Config{})
			c.feed([]byte(tt.head + "\r\n" + tt.body + "GET /next HTTP/1.1\r\nHost: x\r\n\r\n"))
			got := drain(c)
			if len(got) != 2 || got[1].uri != "/next" {
				t.Fatalf("%d requests captured (tap: %v)", len(got), c.Err())
			}
			if got[0].fp.AmbiguousLength != tt.want {
				t.Errorf("AmbiguousLength = %v, want %v", got[0].fp.AmbiguousLength, tt.want)
			}
			if got[1].fp.AmbiguousLength {
				t.Error("the next request is marked too")
			}
		})
	}
}
