package httpfp

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http2"
)

// chromeH1 is a Chromium navigation over HTTP/1.1.
const chromeH1 = "GET /index.html HTTP/1.1\r\nHost: example.org\r\nConnection: keep-alive\r\n" +
	"sec-ch-ua: \"Chromium\";v=\"156\", \"Not(A:Brand\";v=\"24\"\r\nsec-ch-ua-mobile: ?0\r\nsec-ch-ua-platform: \"Linux\"\r\n" +
	"Upgrade-Insecure-Requests: 1\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36\r\n" +
	"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8\r\n" +
	"Sec-Fetch-Site: none\r\nSec-Fetch-Mode: navigate\r\nSec-Fetch-User: ?1\r\nSec-Fetch-Dest: document\r\n" +
	"Accept-Encoding: gzip, deflate, br, zstd\r\nAccept-Language: en-US,en;q=0.9\r\nCookie: session=0123456789abcdef\r\n\r\n"

// BenchmarkCaptureH1 is the tap's cost per HTTP/1.1 request: capture,
// hfp, and pairing with the request. "same" repeats one request, as a
// keep-alive connection does; "alternating" changes the header order at
// every request, so that each one is hashed.
func BenchmarkCaptureH1(b *testing.B) {
	other := strings.Replace(chromeH1, "Connection: keep-alive\r\n", "", 1) + "Connection: keep-alive\r\n"
	other = strings.Replace(other, "\r\n\r\nConnection", "\r\nConnection", 1) + "\r\n"
	for _, alt := range []bool{false, true} {
		for _, cfg := range []Config{{}, {JA4H: true}} {
			b.Run(fmt.Sprintf("alternating=%v/ja4h=%v", alt, cfg.JA4H), func(b *testing.B) {
				c := NewConn(nil, H1, cfg)
				wires := [][]byte{[]byte(chromeH1), []byte(chromeH1)}
				if alt {
					wires[1] = []byte(other)
				}
				r := &http.Request{Method: "GET", RequestURI: "/index.html"}
				b.ReportAllocs()
				b.SetBytes(int64(len(chromeH1)))
				i := 0
				for b.Loop() {
					c.feed(wires[i%2])
					i++
					if _, ok := c.take(r); !ok {
						b.Fatal(c.Err())
					}
				}
			})
		}
	}
}

// BenchmarkCaptureH2 is the tap's cost per HTTP/2 request on a long
// connection (the HPACK dynamic table warm, as browsers use it).
func BenchmarkCaptureH2(b *testing.B) {
	const n = 1000 // requests per connection
	fields := []string{":method: GET", ":authority: example.org", ":scheme: https", ":path: /index.html"}
	for _, l := range strings.Split(strings.TrimSuffix(chromeH1, "\r\n\r\n"), "\r\n")[3:] {
		n, v, _ := strings.Cut(l, ": ")
		fields = append(fields, strings.ToLower(n)+": "+v)
	}
	swapped := slices.Clone(fields)
	swapped[5], swapped[6] = swapped[6], swapped[5]
	for _, alt := range []bool{false, true} {
		// One connection's bytes: the preface, then n requests.
		cl := newH2Client()
		cl.fr.WriteSettings(http2.Setting{ID: 1, Val: 65536}, http2.Setting{ID: 2, Val: 0}, http2.Setting{ID: 4, Val: 6291456}, http2.Setting{ID: 6, Val: 262144})
		cl.fr.WriteWindowUpdate(0, 15663105)
		preface := bytes.Clone(cl.buf.Bytes())
		var frames [][]byte
		for i := range n {
			f := fields
			if alt && i%2 == 1 {
				f = swapped
			}
			before := cl.buf.Len()
			cl.headers(b, uint32(2*i+1), f, 1<<20, 0)
			frames = append(frames, bytes.Clone(cl.buf.Bytes()[before:]))
		}
		for _, cfg := range []Config{{}, {JA4H: true}} {
			b.Run(fmt.Sprintf("alternating=%v/ja4h=%v", alt, cfg.JA4H), func(b *testing.B) {
				r := &http.Request{Method: "GET", Host: "example.org", RequestURI: "/index.html"}
				var c *Conn
				i := 0
				b.ReportAllocs()
				for b.Loop() {
					if i%n == 0 {
						c = NewConn(nil, H2, cfg)
						c.feed(preface)
					}
					c.feed(frames[i%n])
					if _, ok := c.take(r); !ok {
						b.Fatal(c.Err())
					}
					i++
				}
			})
		}
	}
}

func BenchmarkHFP(b *testing.B) {
	names := strings.Split("Host,Connection,sec-ch-ua,sec-ch-ua-mobile,sec-ch-ua-platform,Upgrade-Insecure-Requests,User-Agent,Accept,Sec-Fetch-Site,Sec-Fetch-Mode,Sec-Fetch-User,Sec-Fetch-Dest,Accept-Encoding,Accept-Language,Cookie", ",")
	b.ReportAllocs()
	for b.Loop() {
		HFP(H1, names)
	}
}
