package certs_test

import (
	"context"
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

// Certificates shared by several nodes: a shared cache and lock over this
// node's own directory, which keeps a warm copy. The edge builds the shared
// part from its store (store.Store has Storage's method set). (Not run: it
// needs a CA and a store.)
func ExampleLayeredCache() {
	var st certs.Storage // the edge's store.Resilient, for instance
	m, err := certs.New(certs.Config{
		Mode:  certs.ModeACME,
		Hosts: []string{"example.org"},
		Cache: certs.LayeredCache{
			Shared: certs.StorageCache{
				Storage:    st,
				IsNotFound: func(err error) bool { return false /* errors.Is(err, store.ErrNotFound) */ },
			},
			Local: certs.DirCache("/var/lib/edge"),
		},
		OnEvent: func(e certs.Event) {
			log.Printf("certificate %s: %s, expires %s, error %v, next try %s", e.Name, e.Kind, e.NotAfter, e.Err, e.NextRetry)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- m.Run(ctx) }() // orders, renews, follows the other nodes, rotates ticket keys
	defer func() { stop(); <-ran }()
	srv := &http.Server{Addr: ":443", TLSConfig: m.TLSConfig()}
	if err := srv.ListenAndServeTLS("", ""); err != nil {
		log.Print(err)
	}
}
