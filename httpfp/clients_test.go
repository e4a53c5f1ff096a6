package httpfp_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maatproxy/maat/httpfp"
	"github.com/maatproxy/maat/internal/testclient"
	"github.com/maatproxy/maat/internal/testenv"
	utls "github.com/refraction-networking/utls"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Published Akamai fingerprints (DESIGN.md).
const (
	chromiumH2FP = "1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p"
	curlH2FP     = "3:100;4:33554432;2:0|33488897|0|m,p,s,a"
)

// decodeAll reads the JSON results a server answered, in order.
func decodeAll(t *testing.T, r io.Reader) []result {
	t.Helper()
	var out []result
	dec := json.NewDecoder(r)
	for {
		var res result
		if err := dec.Decode(&res); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		out = append(out, res)
	}
}

// before reports whether name a comes before name b in names (any case).
func before(names []string, a, b string) bool {
	ia := slices.IndexFunc(names, func(n string) bool { return strings.EqualFold(n, a) })
	ib := slices.IndexFunc(names, func(n string) bool { return strings.EqualFold(n, b) })
	return ia >= 0 && ib >= 0 && ia < ib
}

// checkOrders asserts that ab (X-A before X-B, twice) and ba (swapped) are
// fingerprinted as such.
func checkOrders(t *testing.T, ab, ab2, ba []result, h2fp string) {
	t.Helper()
	all := slices.Concat(ab, ab2, ba)
	for i, r := range all {
		if !r.Found || !r.Ordered || !r.TLS {
			t.Fatalf("result %d: no ordered fingerprint: %+v", i, r)
		}
		if hfp, raw := httpfp.SpecHFP(protoOf(r.Proto), r.Names); r.HFP != hfp || r.HFPR != raw {
			t.Errorf("result %d: hfp %s %s, want %s %s", i, r.HFP, r.HFPR, hfp, raw)
		}
		if h2fp != "" && r.H2FP != h2fp {
			t.Errorf("result %d: h2fp %q, want %q", i, r.H2FP, h2fp)
		}
	}
	for _, r := range slices.Concat(ab, ab2) {
		if !before(r.Names, "x-a", "x-b") || r.HFP != ab[0].HFP {
			t.Errorf("X-A, X-B: names %q hfp %s, want X-A first and hfp %s", r.Names, r.HFP, ab[0].HFP)
		}
	}
	for _, r := range ba {
		if !before(r.Names, "x-b", "x-a") || r.HFP == ab[0].HFP {
			t.Errorf("X-B, X-A: names %q hfp %s, want X-B first and another hfp than %s", r.Names, r.HFP, ab[0].HFP)
		}
	}
}

func protoOf(p string) httpfp.Proto {
	switch p {
	case "HTTP/2.0":
		return httpfp.H2
	case "HTTP/3.0":
		return httpfp.H3
	}
	return httpfp.H1
}

func TestCurl(t *testing.T) {
	t.Parallel()
	curl := testenv.NeedCommand(t, "curl")
	s := startServer(t, httpfp.Config{})
	tests := []struct {
		name, flag, proto, h2fp string
	}{
		{"HTTP/1.1", "--http1.1", "HTTP/1.1", ""},
		{"HTTP/2", "--http2", "HTTP/2.0", curlH2FP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Two requests on one connection each time: a POST, then a GET.
			run := func(headers ...string) []result {
				args := []string{"-sSk", "--max-time", "20", tt.flag}
				for _, h := range headers {
					args = append(args, "-H", h)
				}
				args = append(args, "https://"+s.addr+"/one", "--data-binary", "body bytes", "--next", "-sSk", tt.flag)
				for _, h := range headers {
					args = append(args, "-H", h)
				}
				args = append(args, "https://"+s.addr+"/two")
				out, err := exec.Command(curl, args...).Output()
				if err != nil {
					t.Fatalf("curl: %v", err)
				}
				res := decodeAll(t, bytes.NewReader(out))
				if len(res) != 2 || res[0].Path != "/one" || res[1].Path != "/two" || res[0].Proto != tt.proto {
					t.Fatalf("curl results %+v", res)
				}
				return res
			}
			ab, ab2, ba := run("X-A: 1", "X-B: 2"), run("X-A: 1", "X-B: 2"), run("X-B: 2", "X-A: 1")
			// The POST carries Content-Type and Content-Length: another hfp.
			if ab[0].HFP == ab[1].HFP {
				t.Errorf("POST and GET share hfp %s", ab[0].HFP)
			}
			checkOrders(t, ab[1:], ab2[1:], ba[1:], tt.h2fp)
			if ab[0].HFP != ab2[0].HFP || !before(ba[0].Names, "x-b", "x-a") {
				t.Errorf("POSTs: %q / %q / %q", ab[0].Names, ab2[0].Names, ba[0].Names)
			}
			if ab[0].JA4H != "" {
				t.Errorf("JA4H %q while off", ab[0].JA4H)
			}
		})
	}
	if err := s.errs(); err != nil {
		t.Error(err)
	}
}

func TestGoClient(t *testing.T) {
	t.Parallel()
	s := startServer(t, httpfp.Config{JA4H: true})
	tests := []struct {
		name  string
		proto string
		tr    *http.Transport
	}{
		{"HTTP/1.1", "HTTP/1.1", &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
			TLSNextProto:    map[string]func(string, *tls.Conn) http.RoundTripper{},
			MaxConnsPerHost: 1,
		}},
		{"HTTP/2", "HTTP/2.0", &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
			ForceAttemptHTTP2: true,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer tt.tr.CloseIdleConnections()
			client := &http.Client{Transport: tt.tr, Timeout: 20 * time.Second}
			get := func(method, path string, body io.Reader, headers ...string) result {
				req, err := http.NewRequest(method, "https://"+s.addr+path, body)
				if err != nil {
					t.Error(err)
					return result{}
				}
				for i := 0; i+1 < len(headers); i += 2 {
					req.Header.Set(headers[i], headers[i+1])
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return result{}
				}
				defer resp.Body.Close()
				res := decodeAll(t, resp.Body)
				if len(res) != 1 || res[0].Proto != tt.proto || res[0].Path != path {
					t.Errorf("results %+v", res)
					return result{}
				}
				return res[0]
			}
			// Over HTTP/1.1, Go writes header fields sorted by name:
			// swapping them changes nothing. Over HTTP/2 it writes them in
			// map order, which changes from request to request.
			ab := get("GET", "/", nil, "X-A", "1", "X-B", "2")
			ba := get("GET", "/", nil, "X-B", "2", "X-A", "1")
			if !ab.Found || !ab.Ordered || !ba.Found {
				t.Fatalf("Go client: %+v / %+v", ab, ba)
			}
			if tt.proto == "HTTP/1.1" && (ab.HFP != ba.HFP || !before(ab.Names, "x-a", "x-b")) {
				t.Errorf("Go client: %q %s / %q %s", ab.Names, ab.HFP, ba.Names, ba.HFP)
			}
			if ab.JA4H == "" || !strings.HasPrefix(ab.JA4H, "ge"+map[string]string{"HTTP/1.1": "11", "HTTP/2.0": "20"}[tt.proto]+"nn") {
				t.Errorf("JA4H = %q", ab.JA4H)
			}
			if tt.proto == "HTTP/2.0" && (ab.H2FP == "" || ab.H2FP == chromiumH2FP || ab.H2FP == curlH2FP) {
				t.Errorf("Go's h2fp %q: want its own", ab.H2FP)
			}
			t.Logf("Go %s: hfp %s %s h2fp %s", tt.proto, ab.HFP, ab.HFPR, ab.H2FP)

			// Bodies of every framing, then concurrent requests (one
			// connection for HTTP/2, in turn for HTTP/1.1) to the same
			// path, each with a header of its own.
			var wg sync.WaitGroup
			for i := range 48 {
				wg.Go(func() {
					name := fmt.Sprintf("X-I-%d", i%8)
					var body io.Reader
					method := "GET"
					switch i % 3 {
					case 1:
						method, body = "POST", strings.NewReader(strings.Repeat("b", i*100))
					case 2:
						method, body = "POST", io.MultiReader(strings.NewReader("chunked "), strings.NewReader(strings.Repeat("c", i*50)))
					}
					r := get(method, "/same", body, name, fmt.Sprint(i), "X-Value", fmt.Sprint(i))
					if !r.Found || !slices.ContainsFunc(r.Names, func(n string) bool { return strings.EqualFold(n, name) }) {
						t.Errorf("request %d got the fingerprint %q", i, r.Names)
					}
				})
			}
			wg.Wait()
		})
	}
	if err := s.errs(); err != nil {
		t.Error(err)
	}
}

// TestPipelining writes requests back to back, bodies of every framing in
// between, before reading any response.
func TestPipelining(t *testing.T) {
	t.Parallel()
	s := startServer(t, httpfp.Config{})
	c, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	const fake = "GET /fake HTTP/1.1\r\nX-No: 1\r\n\r\n" // a body that looks like a request
	reqs := []string{
		fmt.Sprintf("POST /1 HTTP/1.1\r\nHost: x\r\nX-One: 1\r\nContent-Length: %d\r\n\r\n%s", len(fake), fake),
		fmt.Sprintf("POST /2 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nX-Two: 1\r\n\r\n%x\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n", len(fake), fake),
		"PUT /3 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\nX-Three: 1\r\n\r\nhello",
		"GET /4 HTTP/1.1\r\nX-Four: 1\r\nHost: x\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: x\r\nX-Options: 1\r\n\r\n",
		"GET /5 HTTP/1.1\r\nHost: x\r\nX-Five: 1\r\nConnection: close\r\n\r\n",
	}
	if _, err := io.WriteString(c, strings.Join(reqs, "")); err != nil {
		t.Fatal(err)
	}
	want := []struct{ path, name string }{{"/1", "X-One"}, {"/2", "X-Two"}, {"/3", "X-Three"}, {"/4", "X-Four"}, {"", ""}, {"/5", "X-Five"}}
	br := bufio.NewReader(c)
	for i, w := range want {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if resp.StatusCode == http.StatusContinue {
			if resp, err = http.ReadResponse(br, nil); err != nil {
				t.Fatalf("response %d: %v", i, err)
			}
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if w.path == "" { // OPTIONS *: net/http answers without the handler
			continue
		}
		var r result
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("response %d: %v: %s", i, err, b)
		}
		if r.Path != w.path || !r.Found || !slices.Contains(r.Names, w.name) || slices.Contains(r.Names, "X-No") {
			t.Errorf("response %d: %+v, want %s with %s", i, r, w.path, w.name)
		}
	}
	if err := s.errs(); err != nil {
		t.Error(err)
	}
}

// chromeHeaders returns the header list of a Chromium navigation, in its order.
func chromeHeaders() []string {
	return []string{
		`sec-ch-ua: "Chromium";v="133", "Not(A:Brand";v="99"`, "sec-ch-ua-mobile: ?0", `sec-ch-ua-platform: "Linux"`,
		"upgrade-insecure-requests: 1", "user-agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/133.0.0.0 Safari/537.36",
		"accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "sec-fetch-site: none", "sec-fetch-mode: navigate",
		"sec-fetch-user: ?1", "sec-fetch-dest: document", "accept-encoding: gzip, deflate, br, zstd", "accept-language: en-US,en;q=0.9",
	}
}

// TestUTLSChrome speaks HTTP/2 as Chrome does, over a utls Chrome
// ClientHello: its SETTINGS, WINDOW_UPDATE, pseudo-header and header order.
func TestUTLSChrome(t *testing.T) {
	t.Parallel()
	s := startServer(t, httpfp.Config{JA4H: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, _, err := testclient.Dial(ctx, s.addr, utls.HelloChrome_133, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN %q", p)
	}
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 65536}, http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: 6291456}, http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: 262144})
	fr.WriteWindowUpdate(0, 15663105)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	orders := [][]string{{"x-a: 1", "x-b: 2"}, {"x-a: 1", "x-b: 2"}, {"x-b: 2", "x-a: 1"}}
	for i, extra := range orders {
		hb.Reset()
		// A path per stream: the streams' handlers may run in any order,
		// and requests alike in all but their fields' order cannot be told
		// apart by the handler (TestTakeH2 tests the pairing).
		path := ":path: /" + strconv.Itoa(i)
		fields := slices.Concat([]string{":method: GET", ":authority: localhost", ":scheme: https", path}, chromeHeaders()[:10], extra, chromeHeaders()[10:])
		for _, f := range fields {
			n, v, _ := strings.Cut(f[1:], ": ")
			enc.WriteField(hpack.HeaderField{Name: f[:1] + n, Value: v})
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	bodies := map[uint32]*bytes.Buffer{}
	for done := 0; done < len(orders); {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.DataFrame:
			if bodies[f.StreamID] == nil {
				bodies[f.StreamID] = new(bytes.Buffer)
			}
			bodies[f.StreamID].Write(f.Data())
			if f.StreamEnded() {
				done++
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v", f.ErrCode)
		}
	}
	var res [][]result
	for i := range orders {
		res = append(res, decodeAll(t, bodies[uint32(2*i+1)]))
	}
	checkOrders(t, res[0], res[1], res[2], chromiumH2FP)
	if got := res[0][0].JA4H; !strings.HasPrefix(got, "ge20nn14enus_") {
		t.Errorf("JA4H = %q", got)
	}
	if err := s.errs(); err != nil {
		t.Error(err)
	}
}

// TestHPACKThroughServer sends many requests on one HTTP/2 connection to
// the x/net server, with dynamic-table insertions and evictions, table
// size updates and a SETTINGS_HEADER_TABLE_SIZE change, all streams
// open at once; every handler must see its own header order.
func TestHPACKThroughServer(t *testing.T) {
	t.Parallel()
	s := startServer(t, httpfp.Config{})
	conn, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(conn, http2.ClientPreface)
	fr := http2.NewFramer(conn, conn)
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	const n = 90 // below x/net's 250 concurrent streams
	want := make(map[string][]string)
	orders := [][]string{{"user-agent", "x-a", "x-b", "accept"}, {"x-b", "x-a", "user-agent"}, {"accept", "x-c", "x-a"}}
	for i := range n {
		switch i {
		case 30:
			enc.SetMaxDynamicTableSizeLimit(4096)
			enc.SetMaxDynamicTableSize(128)
		case 31:
			enc.SetMaxDynamicTableSize(0)
		case 32:
			enc.SetMaxDynamicTableSize(4096)
		case 50:
			fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 512})
		}
		path := fmt.Sprintf("/r/%d", i)
		names := []string{":method", ":authority", ":scheme", ":path"}
		hb.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":authority", "localhost"}, {":scheme", "https"}, {":path", path}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		for _, name := range orders[i%len(orders)] {
			enc.WriteField(hpack.HeaderField{Name: name, Value: fmt.Sprintf("%s-%d-%s", name, i%7, strings.Repeat("v", i*13%400))})
			names = append(names, name)
		}
		want[path] = names
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	bodies := map[uint32]*bytes.Buffer{}
	for done := 0; done < n; {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.DataFrame:
			if bodies[f.StreamID] == nil {
				bodies[f.StreamID] = new(bytes.Buffer)
			}
			bodies[f.StreamID].Write(f.Data())
			if f.StreamEnded() {
				done++
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("RST_STREAM %v on %d", f.ErrCode, f.StreamID)
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v", f.ErrCode)
		}
	}
	for id, b := range bodies {
		res := decodeAll(t, b)
		if len(res) != 1 || !res[0].Found {
			t.Fatalf("stream %d: %+v", id, res)
		}
		if w := want[res[0].Path]; !slices.Equal(res[0].Names, w) {
			t.Errorf("%s: names %q, want %q", res[0].Path, res[0].Names, w)
		}
	}
	if err := s.errs(); err != nil {
		t.Error(err)
	}
}

// TestMalformedThroughServer sends an HPACK block that does not decode:
// the tap stops with ErrMalformed and x/net closes the connection.
func TestMalformedThroughServer(t *testing.T) {
	t.Parallel()
	s := startServer(t, httpfp.Config{})
	conn, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(conn, http2.ClientPreface)
	fr := http2.NewFramer(conn, conn)
	fr.WriteSettings()
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0xff, 0x7f}, EndHeaders: true, EndStream: true})
	var goAway *http2.GoAwayFrame
	for goAway == nil {
		f, err := fr.ReadFrame()
		if err != nil {
			break // closed
		}
		goAway, _ = f.(*http2.GoAwayFrame)
	}
	if goAway != nil && goAway.ErrCode != http2.ErrCodeCompression {
		t.Errorf("GOAWAY %v, want COMPRESSION_ERROR", goAway.ErrCode)
	}
	if err := s.errs(); !errors.Is(err, httpfp.ErrMalformed) {
		t.Errorf("tap error %v, want ErrMalformed", err)
	}
}
