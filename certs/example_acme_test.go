package certs_test

import (
	"context"
	"crypto/tls"
	"log"
	"net/http"
	"os/signal"
	"syscall"

	"github.com/quic-go/quic-go/http3"

	"github.com/maatproxy/maat/certs"
)

// Automatic certificates for two names, served over HTTP/1.1, HTTP/2 and
// HTTP/3 with the same GetCertificate, and port 80 answering the CA's
// http-01 requests. (Not run: it needs ports 80 and 443 and a public CA.)
func Example_acme() {
	m, err := certs.New(certs.Config{
		Mode:     certs.ModeACME,
		CacheDir: "/var/lib/edge",
		Hosts:    []string{"example.org", "www.example.org"},
		Email:    "ops@example.org",
		OnEvent: func(e certs.Event) {
			log.Printf("certificate %s: %s, expires %s, error %v", e.Name, e.Kind, e.NotAfter, e.Err)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	go m.Run(ctx) // obtains missing certificates now, renews them later

	site := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello\n")) })
	go http.ListenAndServe(":80", m.HTTPHandler(nil)) // http-01, else redirect to https
	h3 := &http3.Server{Addr: ":443", Handler: site,
		TLSConfig: http3.ConfigureTLSConfig(&tls.Config{GetCertificate: m.GetCertificate})}
	go h3.ListenAndServe()
	srv := &http.Server{Addr: ":443", Handler: site, TLSConfig: m.TLSConfig()}
	log.Fatal(srv.ListenAndServeTLS("", ""))
}
