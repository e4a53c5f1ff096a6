package edge

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"
)

// BenchmarkProxyH1 compares requests through the edge with a bare
// httputil.ReverseProxy behind the same TLS certificate source, both over
// HTTP/1.1 keep-alive to a trivial upstream, in one run. The ratio of the
// two ns/op is the figure the skeleton's budget speaks of (edge ≥ 0.9× the
// bare proxy's requests per second).
func BenchmarkProxyH1(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("hello, world\n"))
	}))
	defer up.Close()

	fp := b.TempDir() + "/fp.jsonl" // the whole chain, fingerprint log included
	cfg, err := ParseConfig("bench.yaml", []byte("listen: {https: '127.0.0.1:0', http: '', admin: '', http3: false}\nlog: {fingerprints: "+fp+"}\n"+
		"tls: {mode: self-signed, cache: ''}\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n"))
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(b.Context())

	// The bare proxy: stock ReverseProxy and transport, same certificates.
	target, _ := url.Parse(up.URL)
	bare := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target); pr.SetXForwarded() }}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	bareSrv := &http.Server{Handler: bare, ReadHeaderTimeout: 10 * time.Second}
	tlsConf := s.certs.TLSConfig().Clone()
	tlsConf.NextProtos = []string{"http/1.1"}
	go bareSrv.Serve(tls.NewListener(ln, tlsConf))
	defer bareSrv.Close()

	run := func(b *testing.B, addr string) {
		tr := &http.Transport{
			TLSClientConfig:     &tls.Config{InsecureSkipVerify: true, ServerName: "localhost", NextProtos: []string{"http/1.1"}},
			MaxIdleConnsPerHost: 64,
		}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr}
		u := "https://" + addr + "/"
		b.ReportAllocs()
		b.SetParallelism(4)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			req, _ := http.NewRequest("GET", u, nil)
			req.Host = "localhost"
			for pb.Next() {
				res, err := c.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					b.Errorf("status %d", res.StatusCode)
					return
				}
			}
		})
	}
	// The same bare proxy with the edge's pooled transport, to show what the
	// edge's own work costs apart from connection pooling.
	pooled := &httputil.ReverseProxy{Transport: newTransport(cfg.Timeouts),
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target); pr.SetXForwarded() }}
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	pooledSrv := &http.Server{Handler: pooled, ReadHeaderTimeout: 10 * time.Second}
	go pooledSrv.Serve(tls.NewListener(ln2, tlsConf))
	defer pooledSrv.Close()

	b.Run("edge", func(b *testing.B) { run(b, s.Addrs().HTTPS) })
	b.Run("bare", func(b *testing.B) { run(b, ln.Addr().String()) })
	b.Run("bare-pooled", func(b *testing.B) { run(b, ln2.Addr().String()) })
}
