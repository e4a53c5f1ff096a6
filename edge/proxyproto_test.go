package edge

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/maatproxy/maat/proxyproto"
)

// TestProxyProtocolThroughEdge: behind an L4 balancer, the client's
// address comes from the PROXY v2 header (with TLVs past 256 bytes, as
// HAProxy sends them) and reaches the upstream and the log; the TLS
// handshake behind it is the client's own. A peer outside trusted_proxies
// cannot send one.
func TestProxyProtocolThroughEdge(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t)
	fp := t.TempDir() + "/fp.jsonl"
	e := startEdgeListen(t, "proxy_protocol: true", "trusted_proxies: [127.0.0.1/32]\nlog: {fingerprints: "+fp+"}\n"+
		"sites: [{hosts: [localhost], upstream: "+up.URL+"}]\n", io.Discard)
	h := proxyproto.Header{Version: 2, Command: proxyproto.Proxy, Family: proxyproto.AFInet, Transport: proxyproto.Stream,
		Source: netip.MustParseAddrPort("203.0.113.7:40000"), Dest: netip.MustParseAddrPort("192.0.2.1:443"),
		TLVs: []proxyproto.TLV{
			{Type: proxyproto.TypeAuthority, Value: []byte("localhost")},
			{Type: proxyproto.TypeUniqueID, Value: bytes.Repeat([]byte{7}, 128)},
			{Type: proxyproto.TypeNoop, Value: make([]byte, 200)},
		}}
	hdr, err := h.AppendBinary(nil)
	if err != nil || len(hdr) <= 256 {
		t.Fatalf("header of %d bytes: %v", len(hdr), err)
	}
	do := func(local string, header []byte, path string) (*http.Response, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		raw, err := d.Dial("tcp", e.Addrs().HTTPS)
		if err != nil {
			return nil, err
		}
		defer raw.Close()
		if _, err := raw.Write(header); err != nil {
			return nil, err
		}
		c := tls.Client(raw, e.tlsConfig("http/1.1"))
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Go-http-client/1.1\r\nConnection: close\r\n\r\n"); err != nil {
			return nil, err
		}
		res, err := http.ReadResponse(bufioReader(c), nil)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
		}
		return res, err
	}
	res, err := do("127.0.0.1", hdr, "/pp")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("through the header: %v %v", res, err)
	}
	heads := up.heads()
	if len(heads) != 1 || !strings.Contains(heads[0], "X-Real-Ip: 203.0.113.7\r\n") || !strings.Contains(heads[0], "X-Forwarded-For: 203.0.113.7\r\n") {
		t.Errorf("the upstream did not get the client's address: %q", heads)
	}
	if l := waitLine(t, fp, "/pp"); l.str("remote_ip") != "203.0.113.7" || l.str("ja4") == "" {
		t.Errorf("logged remote_ip %q ja4 %q", l.str("remote_ip"), l.str("ja4"))
	}
	// From an address outside trusted_proxies the header is not read: it is
	// garbage before the TLS hello, and the handshake fails.
	if _, err := do("127.0.0.2", hdr, "/forged"); err == nil {
		t.Error("a PROXY header from an untrusted peer was believed")
	}
	// Such a peer connects as itself.
	if res, err := do("127.0.0.2", nil, "/direct"); err != nil || res.StatusCode != 200 {
		t.Errorf("an untrusted peer without a header: %v %v", res, err)
	}
}
