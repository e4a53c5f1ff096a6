package testattack

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	utls "github.com/refraction-networking/utls"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The gate attacks' client: one request, sent exactly as written (the
// request target byte for byte, the header fields in order), over
// HTTP/1.1, HTTP/2 or HTTP/3, from a chosen loopback address, with Go's
// TLS stack or a utls parrot's ClientHello, and on HTTP/2 with the
// SETTINGS, window and pseudo-header order of the client it plays.

// H2Profile is how a client opens an HTTP/2 connection and orders a
// request's pseudo-header fields: what the edge's h2fp records (RFC 9113,
// sections 6.5 and 6.9; section 8.3 for the pseudo-header fields).
type H2Profile struct {
	Settings []http2.Setting
	Window   uint32 // the connection's WINDOW_UPDATE increment; 0 = none
	Pseudo   string // the order of :method, :authority, :scheme, :path as letters, e.g. "masp"
}

// ChromeH2 is Chromium's HTTP/2 (DESIGN.md's h2fp of Chromium:
// 1:65536;2:0;4:6291456;6:262144|15663105|0|m,a,s,p).
var ChromeH2 = H2Profile{
	Settings: []http2.Setting{{ID: http2.SettingHeaderTableSize, Val: 65536}, {ID: http2.SettingEnablePush, Val: 0},
		{ID: http2.SettingInitialWindowSize, Val: 6291456}, {ID: http2.SettingMaxHeaderListSize, Val: 262144}},
	Window: 15663105,
	Pseudo: "masp",
}

// GoH2 is the HTTP/2 of x/net's http2.Transport at its defaults (its
// newClientConn): push off, a 4 MiB stream window, 16 KiB frames, a
// 10 MiB header list; a 1 GiB connection window; :authority, :method,
// :path, :scheme.
var GoH2 = H2Profile{
	Settings: []http2.Setting{{ID: http2.SettingEnablePush, Val: 0}, {ID: http2.SettingInitialWindowSize, Val: 4 << 20},
		{ID: http2.SettingMaxFrameSize, Val: 16 << 10}, {ID: http2.SettingMaxHeaderListSize, Val: 10 << 20}},
	Window: 1 << 30,
	Pseudo: "amps",
}

// GateRequest is one request of a gate attack.
type GateRequest struct {
	Proto  string // "h1", "h2" or "h3"
	Method string // "" = GET
	// Target is the request target as sent ("/x/..;/admin/"). Over HTTP/3
	// it must start with "/".
	Target string
	// Header holds the fields after the request line or pseudo-header
	// fields, in order; HTTP/3 sends them in Go's map order.
	Header [][2]string
	From   net.IP // the client's loopback address; nil = the system's choice
	// Parrot, if set, is the utls ClientHello of an HTTP/2 request
	// instead of crypto/tls's.
	Parrot *utls.ClientHelloID
	// H2 is the HTTP/2 profile; nil = GoH2 with crypto/tls, ChromeH2
	// with a parrot.
	H2 *H2Profile
	// Sessions, if set, lets crypto/tls (HTTP/1.1, HTTP/2, HTTP/3) resume
	// a session from it.
	Sessions tls.ClientSessionCache
}

// Answer is what the edge answered a GateRequest.
type Answer struct {
	Status  int
	Header  http.Header
	Body    string // decompressed; at most maxBody bytes
	Resumed bool   // the TLS session was resumed
}

// maxBody bounds what a gate attack reads of an answer.
const maxBody = 1 << 20

// kind names the answer for a tally: the status, or "no answer".
func (a Answer) kind() string {
	if a.Status == 0 {
		return "no answer"
	}
	return strconv.Itoa(a.Status)
}

// Cookie returns the value of the named cookie the answer sets, "" if none.
func (a Answer) Cookie(name string) string {
	for _, c := range (&http.Response{Header: a.Header}).Cookies() {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// Send sends r to the edge and reads its answer, within 20 s.
func (t Target) Send(ctx context.Context, r GateRequest) (Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if r.Method == "" {
		r.Method = http.MethodGet
	}
	switch r.Proto {
	case "h1":
		return t.sendH1(ctx, r)
	case "h2":
		return t.sendH2(ctx, r)
	case "h3":
		return t.sendH3(ctx, r)
	}
	return Answer{}, fmt.Errorf("testattack: unknown protocol %q", r.Proto)
}

// dialGate opens a TLS connection for r offering alpn: crypto/tls's
// ClientHello, or r.Parrot's (whose own ALPN list stands).
func (t Target) dialGate(ctx context.Context, r GateRequest, alpn string) (net.Conn, bool, error) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if r.From != nil {
		d.LocalAddr = &net.TCPAddr{IP: r.From}
	}
	raw, err := d.DialContext(ctx, "tcp", t.HTTPS)
	if err != nil {
		return nil, false, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	}
	if r.Parrot != nil {
		conf := &utls.Config{ServerName: t.Host, InsecureSkipVerify: true} // loopback, and utls has its own types
		c := utls.UClient(raw, conf, *r.Parrot)
		if err := c.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, false, err
		}
		if got := c.ConnectionState().NegotiatedProtocol; got != alpn {
			c.Close()
			return nil, false, fmt.Errorf("testattack: the edge chose ALPN %q for the parrot, not %q", got, alpn)
		}
		return c, c.ConnectionState().DidResume, nil
	}
	conf := t.tlsConfig(alpn)
	conf.ClientSessionCache = r.Sessions
	c := tls.Client(raw, conf)
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, false, err
	}
	if got := c.ConnectionState().NegotiatedProtocol; got != alpn && !(alpn == "http/1.1" && got == "") {
		c.Close()
		return nil, false, fmt.Errorf("testattack: the edge chose ALPN %q, not %q", got, alpn)
	}
	return c, c.ConnectionState().DidResume, nil
}

// sendH1 writes the request line and fields as they are, and
// "Connection: close".
func (t Target) sendH1(ctx context.Context, r GateRequest) (Answer, error) {
	if r.Parrot != nil {
		return Answer{}, errors.New("testattack: a parrot's ClientHello offers h2; send it over h2")
	}
	c, resumed, err := t.dialGate(ctx, r, "http/1.1")
	if err != nil {
		return Answer{}, err
	}
	defer c.Close()
	a, err := exchangeH1(c, r, t.Host)
	a.Resumed = resumed
	return a, err
}

// exchangeH1 writes r on c as HTTP/1.1 with host, unless r's fields hold a
// Host, and reads the answer.
func exchangeH1(c net.Conn, r GateRequest, host string) (Answer, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", r.Method, r.Target)
	if !hasField(r.Header, "Host") {
		fmt.Fprintf(&b, "Host: %s\r\n", host)
	}
	for _, f := range r.Header {
		fmt.Fprintf(&b, "%s: %s\r\n", f[0], f[1])
	}
	b.WriteString("Connection: close\r\n\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		return Answer{}, err
	}
	req := &http.Request{Method: r.Method} // no body to a HEAD
	res, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return Answer{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxBody))
	if err != nil {
		return Answer{}, err
	}
	a := Answer{Status: res.StatusCode, Header: res.Header}
	a.Body, err = decoded(res.Header, body)
	return a, err
}

// SendPlain sends r (its Proto ignored) in plain HTTP/1.1 to addr: the
// port-80 listener, or the TLS port, which answers plain HTTP too.
func (t Target) SendPlain(ctx context.Context, addr string, r GateRequest) (Answer, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if r.Method == "" {
		r.Method = http.MethodGet
	}
	d := &net.Dialer{Timeout: 10 * time.Second}
	if r.From != nil {
		d.LocalAddr = &net.TCPAddr{IP: r.From}
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return Answer{}, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	return exchangeH1(c, r, t.Host)
}

func hasField(h [][2]string, name string) bool {
	for _, f := range h {
		if strings.EqualFold(f[0], name) {
			return true
		}
	}
	return false
}

// sendH2 opens a connection with r's HTTP/2 profile, sends r on stream 1
// and reads the answer to its end.
func (t Target) sendH2(ctx context.Context, r GateRequest) (Answer, error) {
	c, resumed, err := t.dialGate(ctx, r, "h2")
	if err != nil {
		return Answer{}, err
	}
	defer c.Close()
	prof := r.H2
	if prof == nil {
		prof = &GoH2
		if r.Parrot != nil {
			prof = &ChromeH2
		}
	}
	bw := bufio.NewWriter(c)
	fr := http2.NewFramer(bw, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(65536, nil)
	fr.MaxHeaderListSize = 1 << 20
	if _, err := io.WriteString(bw, http2.ClientPreface); err != nil {
		return Answer{}, err
	}
	_ = fr.WriteSettings(prof.Settings...)
	if prof.Window > 0 {
		_ = fr.WriteWindowUpdate(0, prof.Window)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	authority := t.Host
	for _, f := range r.Header {
		if strings.EqualFold(f[0], "Host") { // HTTP/2 carries it as :authority
			authority = f[1]
		}
	}
	for _, f := range pseudoFields(prof.Pseudo, r.Method, authority, r.Target) {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for _, f := range r.Header {
		if !strings.EqualFold(f[0], "Host") {
			_ = enc.WriteField(hpack.HeaderField{Name: strings.ToLower(f[0]), Value: f[1]})
		}
	}
	if hb.Len() > 16384 {
		return Answer{}, errors.New("testattack: a gate request's header block is larger than a frame")
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		return Answer{}, err
	}
	if err := bw.Flush(); err != nil {
		return Answer{}, err
	}
	a, err := readH2(fr, bw)
	a.Resumed = resumed
	return a, err
}

// pseudoFields returns the request's pseudo-header fields in the order
// order spells ("masp": :method, :authority, :scheme, :path).
func pseudoFields(order, method, authority, path string) [][2]string {
	var out [][2]string
	for _, l := range order {
		switch l {
		case 'm':
			out = append(out, [2]string{":method", method})
		case 'a':
			out = append(out, [2]string{":authority", authority})
		case 's':
			out = append(out, [2]string{":scheme", "https"})
		case 'p':
			out = append(out, [2]string{":path", path})
		}
	}
	return out
}

// readH2 reads frames until stream 1 ends, acknowledging SETTINGS and
// giving back the window as DATA arrives.
func readH2(fr *http2.Framer, bw *bufio.Writer) (Answer, error) {
	a := Answer{Header: http.Header{}}
	var body bytes.Buffer
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return a, err
		}
		end := false
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != 1 {
				continue
			}
			for _, hf := range f.Fields {
				if hf.Name == ":status" {
					if a.Status == 0 {
						a.Status, _ = strconv.Atoi(hf.Value)
					}
				} else if !strings.HasPrefix(hf.Name, ":") {
					a.Header.Add(hf.Name, hf.Value)
				}
			}
			end = f.StreamEnded()
		case *http2.DataFrame:
			if f.StreamID != 1 {
				continue
			}
			if body.Len() < maxBody {
				body.Write(f.Data())
			}
			if n := uint32(len(f.Data())); n > 0 {
				_ = fr.WriteWindowUpdate(1, n)
				_ = fr.WriteWindowUpdate(0, n)
			}
			end = f.StreamEnded()
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return a, h2ResetError{f.ErrCode}
			}
		case *http2.GoAwayFrame:
			if f.LastStreamID < 1 {
				return a, fmt.Errorf("testattack: GOAWAY %v", f.ErrCode)
			}
		}
		if err := bw.Flush(); err != nil {
			return a, err
		}
		if end {
			var err error
			a.Body, err = decoded(a.Header, body.Bytes())
			return a, err
		}
	}
}

// h2ResetError is the edge's RST_STREAM of a gate request.
type h2ResetError struct{ code http2.ErrCode }

func (e h2ResetError) Error() string { return "testattack: stream reset: " + e.code.String() }

// sendH3 sends r over a new QUIC connection from r.From with quic-go's
// HTTP/3 client.
func (t Target) sendH3(ctx context.Context, r GateRequest) (Answer, error) {
	if t.HTTP3 == "" {
		return Answer{}, errors.New("testattack: the target has no HTTP/3 listener")
	}
	if r.Parrot != nil {
		return Answer{}, errors.New("testattack: no parrot speaks QUIC here")
	}
	if !strings.HasPrefix(r.Target, "/") {
		return Answer{}, fmt.Errorf("testattack: an HTTP/3 :path must start with /: %q", r.Target)
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: r.From})
	if err != nil {
		return Answer{}, err
	}
	defer udp.Close()
	qt := &quic.Transport{Conn: udp}
	defer qt.Close()
	raddr, err := net.ResolveUDPAddr("udp", t.HTTP3)
	if err != nil {
		return Answer{}, err
	}
	conf := t.tlsConfig("h3")
	conf.ClientSessionCache = r.Sessions
	tr := &http3.Transport{TLSClientConfig: conf, DisableCompression: true,
		Dial: func(ctx context.Context, _ string, tlsConf *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return qt.Dial(ctx, raddr, tlsConf, qc)
		}}
	defer tr.Close()
	// The target travels as URL.Opaque, which quic-go sends as :path;
	// one that starts with "//" is written as the absolute URL it would be
	// read as, whose scheme and host quic-go takes off again.
	opaque := r.Target
	if strings.HasPrefix(opaque, "//") {
		opaque = "//" + t.Host + r.Target
	}
	req := &http.Request{Method: r.Method, Header: http.Header{}, Host: t.Host,
		URL: &url.URL{Scheme: "https", Host: t.HTTP3, Opaque: opaque}}
	req = req.WithContext(ctx)
	for _, f := range r.Header {
		if strings.EqualFold(f[0], "Host") {
			req.Host = f[1]
			continue
		}
		req.Header.Add(f[0], f[1])
	}
	res, err := tr.RoundTrip(req)
	if err != nil {
		return Answer{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxBody))
	if err != nil {
		return Answer{}, err
	}
	a := Answer{Status: res.StatusCode, Header: res.Header, Resumed: res.TLS != nil && res.TLS.DidResume}
	a.Body, err = decoded(res.Header, body)
	return a, err
}

// decoded undoes a gzip Content-Encoding (the gate attacks offer no other).
func decoded(h http.Header, body []byte) (string, error) {
	switch h.Get("Content-Encoding") {
	case "", "identity":
		return string(body), nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		out, err := io.ReadAll(io.LimitReader(zr, maxBody))
		return string(out), err
	}
	return "", fmt.Errorf("testattack: unexpected Content-Encoding %q", h.Get("Content-Encoding"))
}
