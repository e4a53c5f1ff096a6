package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"

	"github.com/maatproxy/maat/certs"
)

// A development server with certificates from the self-signed local CA; the
// client trusts the CA's root, as an operator would after `edge demo` prints
// it.
func Example() {
	m, err := certs.New(certs.Config{Mode: certs.ModeSelfSigned, AnyHost: true})
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "hello over %s", r.Proto)
		}),
		TLSConfig: m.TLSConfig(),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.ServeTLS(ln, "", "")
	defer srv.Close()

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(m.RootPEM())
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: true,
	}}
	resp, err := client.Get("https://" + ln.Addr().String()) // an IP address:: no server name, a loopback certificate
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))
	// Output: hello over HTTP/2.0
}
