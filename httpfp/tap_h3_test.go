package httpfp_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maatproxy/maat/httpfp"
	"github.com/maatproxy/maat/internal/testclient"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// TestHTTP3 serves HTTP/3 with H3Tracer and NewH3Context and checks the
// fields' order and the pairing of concurrent requests.
func TestHTTP3(t *testing.T) {
	t.Parallel()
	tlsConf, err := testclient.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http3.Server{
		TLSConfig:  http3.ConfigureTLSConfig(tlsConf),
		QUICConfig: &quic.Config{Tracer: httpfp.H3Tracer(httpfp.Config{JA4H: true}, nil)},
		ConnContext: func(ctx context.Context, c *quic.Conn) context.Context {
			return httpfp.NewH3Context(ctx, c)
		},
		Handler: httpfp.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			res := result{Proto: r.Proto, Path: r.URL.Path}
			if fp, ok := httpfp.FromRequest(r); ok {
				res.Found, res.Fingerprint = true, *fp
			}
			json.NewEncoder(w).Encode(res)
		})),
	}
	go srv.Serve(pc)
	t.Cleanup(func() { srv.Close(); pc.Close() })

	tr := &http3.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	defer tr.Close()
	client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	get := func(path string, headers ...string) result {
		req, _ := http.NewRequest("GET", "https://"+pc.LocalAddr().String()+path, nil)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return result{}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var r result
		if err := json.Unmarshal(b, &r); err != nil {
			t.Errorf("%v: %s", err, b)
		}
		return r
	}
	r := get("/", "X-A", "1", "X-B", "2", "Cookie", "a=b")
	if r.Proto != "HTTP/3.0" || !r.Found || !r.Ordered || !strings.HasPrefix(r.HFP, "h3") || r.H2FP != "" {
		t.Fatalf("HTTP/3: %+v", r)
	}
	if !slices.Contains(r.Names, "x-a") || !slices.Contains(r.Names, "cookie") || !strings.HasPrefix(r.Names[0], ":") {
		t.Errorf("names %q", r.Names)
	}
	if hfp, raw := httpfp.SpecHFP(httpfp.H3, r.Names); r.HFP != hfp || r.HFPR != raw {
		t.Errorf("hfp %s %s, want %s %s", r.HFP, r.HFPR, hfp, raw)
	}
	if !strings.HasPrefix(r.JA4H, "ge30cn") {
		t.Errorf("JA4H = %q", r.JA4H)
	}
	t.Logf("Go HTTP/3: hfp %s %s", r.HFP, r.HFPR)

	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			name := fmt.Sprintf("x-i-%d", i%8)
			r := get("/same", name, fmt.Sprint(i), "X-Value", fmt.Sprint(i))
			if !r.Found || !slices.Contains(r.Names, name) {
				t.Errorf("request %d got %q", i, r.Names)
			}
		})
	}
	wg.Wait()
}
