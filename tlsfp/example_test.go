package tlsfp_test

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"

	"github.com/maatproxy/maat/tlsfp"
)

// A ClientHello as it arrived in one TLS record (FoxIO's https3-301-get.pcap).
const helloRecord = "16030100720100006e030152937a55b696cc98ae7b08ec10e765c98aefa82db3081771f8627617b967980800002e00390038003500160013000a00330032002f009a00990096000500040015001200090014001100080006000300ff0100001700000013001100000e7777772e6769746875622e636f6d"

func ExampleParseRecords() {
	b, _ := hex.DecodeString(helloRecord)
	h, err := tlsfp.ParseRecords(b)
	if err != nil {
		fmt.Println(err)
		return
	}
	fp := h.Fingerprint(false)
	fmt.Println(fp.JA4)
	fmt.Println(fp.JA4O)
	fmt.Println(fp.TLSVersion, fp.SNI)
	// Output:
	// t10d230100_6a57a6f57151_000000000000
	// t10d230100_ce175d585f73_9af15b336e6a
	// 1.0 www.github.com
}

func ExampleNewListener() {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return
	}
	conf := &tls.Config{ /* certificates */ }
	ln := tls.NewListener(tlsfp.NewListener(tcp, tlsfp.Config{
		OnError: func(remote net.Addr, err error) { /* log it */ },
	}), conf)
	srv := &http.Server{
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if fc := tlsfp.ConnOf(c); fc != nil {
				return tlsfp.NewContext(ctx, fc)
			}
			return ctx
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if fp := tlsfp.FromContext(r.Context()); fp != nil {
				fmt.Fprintln(w, fp.JA4, fp.Client.Family)
			}
		}),
	}
	go srv.Serve(ln)
	srv.Close()
}
