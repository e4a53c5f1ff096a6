package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	utls "github.com/refraction-networking/utls"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/maatproxy/maat/internal/testattack"
)

// h2conn is a person's browser connection: utls's Chrome 133 ClientHello,
// Chrome's HTTP/2 SETTINGS, window and pseudo-header order
// (testattack.ChromeH2), kept alive for the person's requests, one at a
// time. One goroutine uses it.
type h2conn struct {
	c    net.Conn
	bw   *bufio.Writer
	fr   *http2.Framer
	enc  *hpack.Encoder
	hb   bytes.Buffer
	host string
	next uint32 // the next stream's ID
}

// answer is what a front answered one request.
type answer struct {
	status  int
	cookies []string // the Set-Cookie fields' "name=value"
	body    string   // decompressed, at most maxBody bytes
}

const maxBody = 256 << 10

func dialH2(ctx context.Context, addr, host string, from net.IP) (*h2conn, error) {
	d := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: from}}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := utls.UClient(raw, &utls.Config{ServerName: host, InsecureSkipVerify: true}, utls.HelloChrome_133) // loopback
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		c.Close()
		return nil, fmt.Errorf("the front chose ALPN %q, not h2", p)
	}
	h := &h2conn{c: c, bw: bufio.NewWriterSize(c, 16<<10), host: host, next: 1}
	h.fr = http2.NewFramer(h.bw, c)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(65536, nil)
	h.fr.MaxHeaderListSize = 1 << 20
	h.enc = hpack.NewEncoder(&h.hb)
	prof := testattack.ChromeH2
	_, _ = io.WriteString(h.bw, http2.ClientPreface)
	_ = h.fr.WriteSettings(prof.Settings...)
	_ = h.fr.WriteWindowUpdate(0, prof.Window)
	if err := h.bw.Flush(); err != nil {
		c.Close()
		return nil, err
	}
	return h, nil
}

func (h *h2conn) close() { h.c.Close() }

var errGoAway = errors.New("GOAWAY")

// get sends a GET for target with header (in order, lower case) and the
// cookie, if any, and reads the answer within timeout.
func (h *h2conn) get(target string, header [][2]string, cookie string, timeout time.Duration) (answer, error) {
	_ = h.c.SetDeadline(time.Now().Add(timeout))
	id := h.next
	h.next += 2
	h.hb.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":authority", h.host}, {":scheme", "https"}, {":path", target}} {
		_ = h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for _, f := range header {
		_ = h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if cookie != "" {
		_ = h.enc.WriteField(hpack.HeaderField{Name: "cookie", Value: cookie})
	}
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		return answer{}, err
	}
	if err := h.bw.Flush(); err != nil {
		return answer{}, err
	}
	var a answer
	var body bytes.Buffer
	gz := false
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return a, err
		}
		end := false
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = h.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = h.fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != id {
				continue
			}
			for _, hf := range f.Fields {
				switch hf.Name {
				case ":status":
					if a.status == 0 {
						a.status, _ = strconv.Atoi(hf.Value)
					}
				case "set-cookie":
					v, _, _ := strings.Cut(hf.Value, ";")
					a.cookies = append(a.cookies, strings.TrimSpace(v))
				case "content-encoding":
					gz = hf.Value == "gzip"
				}
			}
			end = f.StreamEnded()
		case *http2.DataFrame:
			if f.StreamID != id {
				continue
			}
			if body.Len() < maxBody {
				body.Write(f.Data())
			}
			if n := uint32(len(f.Data())); n > 0 {
				_ = h.fr.WriteWindowUpdate(0, n)
				if !f.StreamEnded() {
					_ = h.fr.WriteWindowUpdate(id, n)
				}
			}
			end = f.StreamEnded()
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				return a, fmt.Errorf("stream reset: %v", f.ErrCode)
			}
		case *http2.GoAwayFrame:
			if f.LastStreamID < id {
				return a, errGoAway
			}
		}
		if h.bw.Buffered() > 0 {
			if err := h.bw.Flush(); err != nil {
				return a, err
			}
		}
		if end {
			a.body = body.String()
			if gz {
				if zr, err := gzip.NewReader(&body); err == nil {
					b, _ := io.ReadAll(io.LimitReader(zr, maxBody))
					a.body = string(b)
				}
			}
			return a, nil
		}
	}
}

// statusOK reports whether an answer is the site's page.
func (a answer) ok() bool { return a.status == http.StatusOK && strings.Contains(a.body, "<p>ok</p>") }
