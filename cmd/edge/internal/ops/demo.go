package ops

import (
	"context"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// StartDemoUpstream serves the demo application on a loopback port: a page
// that shows what the edge saw of the visitor. It returns its URL.
func StartDemoUpstream(ctx context.Context) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("edge: demo upstream: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(demoPage), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	return (&url.URL{Scheme: "http", Host: ln.Addr().String()}).String(), nil
}

var demoTmpl = template.Must(template.New("demo").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Maat demo</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#1a1a1a}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.3rem .5rem;border-bottom:1px solid #ddd;vertical-align:top}
code,td.v{font-family:ui-monospace,monospace;word-break:break-all}</style></head>
<body><h1>You reached the upstream through Maat</h1>
<p>This page is the demo application behind the edge. The edge fingerprinted your connection,
weighed it with the default policy and let you through. Here is what it saw.</p>
<table>{{range .Rows}}<tr><th scope="row">{{.K}}</th><td class="v">{{.V}}</td></tr>{{end}}</table>
<h2>Try</h2>
<ul>
<li><code>curl -k {{.Base}}</code> — curl as itself is welcome.</li>
<li><code>curl -k -A "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36" {{.Base}}</code> — curl pretending to be Chrome is caught.</li>
<li><code>curl -k --http3 {{.Base}}</code> — HTTP/3, if your curl has it.</li>
<li>Open {{.Base}} in a browser: a short proof of work, then a pass cookie.</li>
</ul>
<p>Every decision is one line of the fingerprint log (<code>edge-fp.jsonl</code>); summarize it with <code>edge fp top edge-fp.jsonl</code>.</p>
</body></html>`))

func demoPage(w http.ResponseWriter, r *http.Request) {
	type row struct{ K, V string }
	var rows []row
	var keys []string
	for k := range r.Header {
		if strings.HasPrefix(k, "X-Maat-") || strings.HasPrefix(k, "X-Forwarded-") || k == "X-Real-Ip" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		rows = append(rows, row{k, strings.Join(r.Header[k], ", ")})
	}
	rows = append(rows, row{"User-Agent", r.UserAgent()})
	base := "https://" + r.Host + "/"
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = demoTmpl.Execute(w, struct {
		Rows []row
		Base string
	}{rows, base})
}
