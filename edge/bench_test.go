package edge

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/edge/internal/upstream"
	"github.com/maatproxy/maat/fplog"
)

// startBenchEdge starts an edge with yamlText, serving HTTPS only (no
// HTTP/3) with a self-signed certificate, until b ends.
func startBenchEdge(b *testing.B, yamlText string) (*Server, config.Config) {
	return startBenchEdgeWith(b, yamlText, nil)
}

// startBenchEdgeWith is startBenchEdge, the configuration edited by edit
// (when not nil) before the edge starts.
func startBenchEdgeWith(b *testing.B, yamlText string, edit func(*config.Config)) (*Server, config.Config) {
	b.Helper()
	cfg, err := config.Parse("bench.yaml", []byte("listen: {https: '127.0.0.1:0', http: '', admin: '', http3: false}\n"+
		"tls: {mode: self-signed, cache: ''}\n"+yamlText))
	if err != nil {
		b.Fatal(err)
	}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s, cfg
}

// BenchmarkProxyH1 compares requests through the edge with a bare
// httputil.ReverseProxy behind the same TLS certificate source, both over
// HTTP/1.1 keep-alive to a trivial upstream, in one run. The ratio of the
// two ns/op is the figure the skeleton's budget speaks of (edge ≥ 0.9× the
// bare proxy's requests per second).
func BenchmarkProxyH1(b *testing.B) { benchmarkProxy(b, "http/1.1") }

// BenchmarkProxyH2 is BenchmarkProxyH1 over HTTP/2 (one connection per
// client goroutine's transport, streams multiplexed).
func BenchmarkProxyH2(b *testing.B) { benchmarkProxy(b, "h2") }

func benchmarkProxy(b *testing.B, proto string) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("hello, world\n"))
	}))
	defer up.Close()

	fp := b.TempDir() + "/fp.jsonl" // the whole chain, fingerprint log included
	s, cfg := startBenchEdge(b, "log: {fingerprints: "+fp+"}\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n")

	// The bare proxy: stock ReverseProxy and transport, same certificates.
	target, _ := url.Parse(up.URL)
	bare := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target); pr.SetXForwarded() }}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	bareSrv := &http.Server{Handler: bare, ReadHeaderTimeout: 10 * time.Second}
	tlsConf := s.certs.TLSConfig().Clone()
	tlsConf.NextProtos = []string{proto}
	go bareSrv.Serve(tls.NewListener(ln, tlsConf))
	defer bareSrv.Close()

	run := func(b *testing.B, addr string) {
		clientTLS := &tls.Config{InsecureSkipVerify: true, ServerName: "localhost", NextProtos: []string{proto}}
		var tr interface {
			http.RoundTripper
			CloseIdleConnections()
		} = &http.Transport{TLSClientConfig: clientTLS, MaxIdleConnsPerHost: 64}
		if proto == "h2" {
			tr = h2Transport(&http.Transport{TLSClientConfig: clientTLS})
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
	pooled := &httputil.ReverseProxy{Transport: upstream.NewHTTPTransport(upstreamOptions(&cfg)),
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target); pr.SetXForwarded() }}
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	pooledSrv := &http.Server{Handler: pooled, ReadHeaderTimeout: 10 * time.Second}
	go pooledSrv.Serve(tls.NewListener(ln2, tlsConf))
	defer pooledSrv.Close()

	b.Run("edge", func(b *testing.B) { run(b, s.Addrs().HTTPS) })
	b.Run("bare", func(b *testing.B) { run(b, ln.Addr().String()) })
	b.Run("bare-pooled", func(b *testing.B) { run(b, ln2.Addr().String()) })
}

// BenchmarkChallengeFlood measures the DESIGN's budget for pages under
// flood: the edge answering every request with a challenge page (the
// default policy's path to it: fingerprint, policy, token, page, logs)
// against a plain net/http server whose trivial handler serves the same
// bytes with the same headers, both behind the same TLS over HTTP/1.1
// keep-alive, in one run. The ratio of the two ns/op is the figure.
func BenchmarkChallengeFlood(b *testing.B) {
	dir := b.TempDir()
	policy := dir + "/policy.yaml"
	if err := os.WriteFile(policy, []byte("bots:\n  - {name: everyone, path_regex: ., action: CHALLENGE}\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	s, _ := startBenchEdge(b, "log: {fingerprints: "+dir+"/fp.jsonl}\npolicy: "+policy+"\n"+
		"sites: [{hosts: [localhost], upstream: 'http://127.0.0.1:9'}]\n")

	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true, ServerName: "localhost", NextProtos: []string{"http/1.1"}},
		MaxIdleConnsPerHost: 64,
		DisableCompression:  true, // the header below asks for gzip; keep the bytes as sent
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(addr string) (*http.Response, []byte, error) {
		req, _ := http.NewRequest("GET", "https://"+addr+"/wiki/Main_Page", nil)
		req.Host = "localhost"
		req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0")
		req.Header.Set("Accept", "text/html,application/xhtml+xml")
		req.Header.Set("Accept-Encoding", "gzip, deflate, br, zstd")
		req.Header.Set("Accept-Language", "en-US,en;q=0.5")
		req.Header.Set("Sec-Fetch-Mode", "navigate")
		res, err := client.Do(req)
		if err != nil {
			return nil, nil, err
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		return res, body, err
	}
	res, page, err := get(s.Addrs().HTTPS)
	if err != nil {
		b.Fatal(err)
	}
	if res.StatusCode != http.StatusForbidden || res.Header.Get("Maat-Mitigated") != "challenge" ||
		res.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(res.Header.Get("Content-Security-Policy"), "nonce-") {
		b.Fatalf("not a gzipped challenge page: %d %v", res.StatusCode, res.Header)
	}
	hdr := res.Header.Clone()
	hdr.Del("Date")
	status := res.StatusCode
	fixed := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		for k, vs := range hdr {
			h[k] = vs
		}
		w.WriteHeader(status)
		w.Write(page)
	})}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	tlsConf := s.certs.TLSConfig().Clone()
	tlsConf.NextProtos = []string{"http/1.1"}
	go fixed.Serve(tls.NewListener(ln, tlsConf))
	defer fixed.Close()

	run := func(b *testing.B, addr string) {
		b.ReportAllocs()
		b.SetParallelism(4)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				res, body, err := get(addr)
				if err != nil {
					b.Error(err)
					return
				}
				if res.StatusCode != status || len(body) < len(page)/2 {
					b.Errorf("status %d, %d bytes", res.StatusCode, len(body))
					return
				}
			}
		})
	}
	b.Run("edge", func(b *testing.B) { run(b, s.Addrs().HTTPS) })
	b.Run("fixed", func(b *testing.B) { run(b, ln.Addr().String()) })
}

// discardWriter is a ResponseWriter that keeps nothing but its header map,
// cleared between requests; it takes deadlines as net/http's writers do.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header              { return w.h }
func (w *discardWriter) Write(p []byte) (int, error)      { return len(p), nil }
func (w *discardWriter) WriteHeader(int)                  {}
func (w *discardWriter) Flush()                           {}
func (w *discardWriter) SetWriteDeadline(time.Time) error { return nil }
func (w *discardWriter) SetReadDeadline(time.Time) error  { return nil }

// BenchmarkHandlerAllow is the Handler's own share of an allowed request
// (hygiene, policy, proxy, upstream client, fingerprint log), without the
// server's parsing, TLS or the client: net/http's server, TLS and the
// kernel are the same for every Go front, so this is the part the edge's
// code decides. The upstream answers 1 KiB on loopback.
func BenchmarkHandlerAllow(b *testing.B) {
	body := strings.Repeat("x", 1024)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, body)
	}))
	defer up.Close()
	cfg, err := config.Parse("bench.yaml", []byte("tls: {mode: self-signed, cache: ''}\nsites: [{hosts: [localhost], upstream: "+up.URL+"}]\n"))
	if err != nil {
		b.Fatal(err)
	}
	fpw, err := fplog.NewWriter(fplog.Config{Path: b.TempDir() + "/fp.jsonl"})
	if err != nil {
		b.Fatal(err)
	}
	defer fpw.Close()
	h, err := NewHandler(cfg, Env{FPLog: fpw})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	in, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET /wiki/Main_Page?action=view HTTP/1.1\r\nHost: localhost\r\n" +
		"User-Agent: Go-http-client/1.1\r\nAccept: */*\r\nAccept-Encoding: gzip\r\n\r\n")))
	if err != nil {
		b.Fatal(err)
	}
	in.RemoteAddr = "127.0.0.1:40000"
	w := &discardWriter{h: http.Header{}}
	ctx, cancel := context.WithCancel(context.Background()) // as a server's request has
	defer cancel()
	in = in.WithContext(ctx)
	b.ReportAllocs()
	for b.Loop() {
		r := *in
		clear(w.h)
		h.ServeHTTP(w, &r)
	}
}
