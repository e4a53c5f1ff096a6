package proxyproto_test

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/maatproxy/maat/proxyproto"
)

func ExampleNewListener() {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return
	}
	defer tcp.Close()
	ln, err := proxyproto.NewListener(tcp, proxyproto.Config{
		Timeout: 5 * time.Second,
		// Trusted: the balancers' networks, if others may connect too.
		OnError: func(remote net.Addr, err error) { /* log it */ },
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// A balancer relays a client's connection.
	go func() {
		c, err := net.Dial("tcp", tcp.Addr().String())
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "PROXY TCP4 203.0.113.7 192.0.2.10 51234 443\r\nhello")
	}()

	c, err := ln.Accept() // never reads: the header is read by c's first Read
	if err != nil {
		return
	}
	defer c.Close()
	b, _ := io.ReadAll(c)
	fmt.Println(c.RemoteAddr(), c.LocalAddr(), string(b))
	// Output: 203.0.113.7:51234 192.0.2.10:443 hello
}

func ExampleHeader_AppendBinary() {
	h := proxyproto.Header{
		Version:   2,
		Command:   proxyproto.Proxy,
		Family:    proxyproto.AFInet6,
		Transport: proxyproto.Stream,
		Source:    netip.MustParseAddrPort("[2001:db8::7]:51234"),
		Dest:      netip.MustParseAddrPort("[2001:db8::10]:443"),
		TLVs: []proxyproto.TLV{
			{Type: proxyproto.TypeAuthority, Value: []byte("example.org")},
			{Type: proxyproto.TypeCRC32C}, // computed by AppendBinary
		},
	}
	b, err := h.AppendBinary(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, n, err := proxyproto.Parse(b)
	if err != nil {
		fmt.Println(err)
		return
	}
	authority, _ := p.Lookup(proxyproto.TypeAuthority)
	fmt.Println(n, p.Source, string(authority))
	// Output: 73 [2001:db8::7]:51234 example.org
}
