package challenge

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestChallengeNonNavigation(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	tests := []struct {
		name   string
		method string
		header map[string]string
		json   bool
	}{
		{name: "POST form", method: http.MethodPost},
		{name: "PUT", method: http.MethodPut},
		{name: "fetch cors", method: http.MethodGet, header: map[string]string{"Sec-Fetch-Mode": "cors", "Accept": "application/json"}, json: true},
		{name: "fetch no-cors image", method: http.MethodGet, header: map[string]string{"Sec-Fetch-Mode": "no-cors", "Accept": "image/avif,*/*"}},
		{name: "XHR", method: http.MethodGet, header: map[string]string{"X-Requested-With": "XMLHttpRequest"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(tt.method, "https://example.org/api/save", strings.NewReader("a=b"))
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			c.Challenge(w, r, alice, Spec{}, "req-1")
			if w.Code != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", w.Code)
			}
			if w.Header().Get("Retry-After") == "" || w.Header().Get("Location") != "" || isHTML(w) {
				t.Errorf("headers %v", w.Header())
			}
			if tt.json {
				var v struct{ Error, RequestID string }
				if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || v.Error != "challenge_required" {
					t.Errorf("JSON body %q: %v", w.Body, err)
				}
			}
		})
	}
}

var nonceRE = regexp.MustCompile(`script-src 'nonce-([A-Za-z0-9_-]+)'`)

func TestChallengePage(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	tests := []struct {
		name      string
		spec      Spec
		wantJS    bool
		wantMeta  string
		navigates bool
	}{
		{name: "pow", spec: Spec{Bits: 16}, wantJS: true, wantMeta: "<noscript><meta http-equiv=\"refresh\""},
		{name: "metarefresh", spec: Spec{Algorithm: "metarefresh"}, wantJS: true, wantMeta: "<noscript><meta http-equiv=\"refresh\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "https://example.org/wiki/Page?x=1", nil)
			r.Header.Set("Sec-Fetch-Mode", "navigate")
			w := httptest.NewRecorder()
			c.Challenge(w, r, alice, tt.spec, "req-2")
			body := w.Body.String()
			if w.Code != http.StatusOK || !isHTML(w) {
				t.Fatalf("status %d type %q", w.Code, w.Header().Get("Content-Type"))
			}
			if !strings.Contains(body, tt.wantMeta) {
				t.Errorf("no %s in %s", tt.wantMeta, body)
			}
			if !strings.Contains(body, "r=%2Fwiki%2FPage%3Fx%3D1") {
				t.Errorf("original URL not carried: %s", body)
			}
			m := nonceRE.FindStringSubmatch(w.Header().Get("Content-Security-Policy"))
			if tt.wantJS {
				if m == nil || !strings.Contains(body, `<script nonce="`+m[1]+`"`) {
					t.Errorf("script nonce does not match CSP %q", w.Header().Get("Content-Security-Policy"))
				}
			}
			if w.Header().Get("Cache-Control") != "no-store" {
				t.Error("challenge page may be cached")
			}
		})
	}
}

func TestPagesStatus(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, func(cfg *Config) { cfg.Contact = "ops@example.org" })
	tests := []struct {
		name   string
		serve  func(w http.ResponseWriter, r *http.Request)
		status int
		want   []string
	}{
		{"deny", func(w http.ResponseWriter, r *http.Request) { c.Deny(w, r, "req-3", "bad_ua") }, 403, []string{"Access denied", "req-3", "bad_ua", "ops@example.org"}},
		{"rate", func(w http.ResponseWriter, r *http.Request) { c.RateLimited(w, r, "req-4", 1500*time.Millisecond) }, 429, []string{"Too many requests", "2 seconds", "req-4"}},
		{"rate one second", func(w http.ResponseWriter, r *http.Request) { c.RateLimited(w, r, "req-5", time.Second) }, 429, []string{"1 second.", "req-5"}},
		{"502", func(w http.ResponseWriter, r *http.Request) { c.Error(w, r, 502, "req-6", "upstream_refused") }, 502, []string{"invalid answer", "not a problem with your browser", "upstream_refused"}},
		{"503", func(w http.ResponseWriter, r *http.Request) { c.Error(w, r, 503, "req-7", "overloaded") }, 503, []string{"temporarily unavailable"}},
		{"504", func(w http.ResponseWriter, r *http.Request) { c.Error(w, r, 504, "req-8", "upstream_timeout") }, 504, []string{"too long"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "https://example.org/", nil)
			w := httptest.NewRecorder()
			tt.serve(w, r)
			if w.Code != tt.status || !isHTML(w) {
				t.Fatalf("status %d type %q", w.Code, w.Header().Get("Content-Type"))
			}
			for _, s := range tt.want {
				if !strings.Contains(w.Body.String(), s) {
					t.Errorf("page lacks %q:\n%s", s, w.Body)
				}
			}
			if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
				t.Errorf("CSP %q", csp)
			}
			if tt.status == 429 && w.Header().Get("Retry-After") == "" {
				t.Error("no Retry-After")
			}
		})
	}
}

// TestPageSize holds the challenge page and its scripts to 20 KB gzipped.
func TestPageSize(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	r := httptest.NewRequest(http.MethodGet, "https://example.org/", nil)
	r.Header.Set("Accept-Encoding", "gzip, br")
	w := httptest.NewRecorder()
	c.Challenge(w, r, alice, Spec{}, "req")
	if w.Header().Get("Content-Encoding") != "gzip" {
		t.Fatal("page not gzipped")
	}
	zr, err := gzip.NewReader(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(zr); err != nil || !bytes.Contains(b, []byte("<!DOCTYPE html>")) {
		t.Fatalf("gunzip: %v", err)
	}
	total := w.Body.Len()
	for _, name := range []string{"solve.js", "worker.js", "maat.css"} {
		a := c.assets[name]
		if a.gz == nil {
			t.Fatalf("%s not precompressed", name)
		}
		total += len(a.gz)
	}
	t.Logf("challenge page + JS + CSS: %d bytes gzipped", total)
	if total > 20*1024 {
		t.Errorf("%d bytes gzipped, budget 20 KB", total)
	}
}

func TestTemplateDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "brand.html"), []byte(`{{define "brand"}}<img src="{{asset "logo.svg"}}" alt="Example Wiki">{{end}}`), 0o644)
	os.Mkdir(filepath.Join(dir, "static"), 0o755)
	os.WriteFile(filepath.Join(dir, "static", "logo.svg"), []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`), 0o644)
	c, _ := newTest(t, func(cfg *Config) { cfg.TemplateDir = dir })
	w := httptest.NewRecorder()
	c.Deny(w, httptest.NewRequest(http.MethodGet, "/", nil), "r", "x")
	if !strings.Contains(w.Body.String(), `alt="Example Wiki"`) || !strings.Contains(w.Body.String(), "/.maat/static/logo.svg?v=") {
		t.Errorf("override not used: %s", w.Body)
	}
	if w := do(c, alice, staticPrefix+"logo.svg"); w.Code != 200 {
		t.Errorf("logo: %d", w.Code)
	}

	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "x.html"), []byte(`{{define "brand"}}{{end`), 0o644)
	if _, err := New(Config{Secret: testSecret, TemplateDir: bad}); err == nil {
		t.Error("broken template accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"minimal", Config{Secret: testSecret}, true},
		{"short secret", Config{Secret: []byte("short")}, false},
		{"negative ttl", Config{Secret: testSecret, PassTTL: -1}, false},
		{"wait too long", Config{Secret: testSecret, Wait: time.Hour}, false},
		{"bad signing key", Config{Secret: testSecret, SigningKey: []byte{1, 2}}, false},
		{"missing template dir", Config{Secret: testSecret, TemplateDir: "/nonexistent/maat"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.cfg.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v", err)
			}
		})
	}
}

func TestParseBinding(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   []string
		want Binding
		ok   bool
	}{{nil, BindNone, true}, {[]string{"ip_prefix", "ja4"}, BindIPPrefix | BindJA4, true}, {[]string{"ja4"}, BindJA4, true}, {[]string{"asn"}, 0, false}} {
		got, err := ParseBinding(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseBinding(%v) = %v, %v", tt.in, got, err)
		}
	}
}

func TestFailurePagesForAPIs(t *testing.T) {
	t.Parallel()
	c, _ := newTest(t, nil)
	r := httptest.NewRequest(http.MethodPost, "https://example.org/api", nil)
	r.Header.Set("Accept", "application/json")
	for _, tt := range []struct {
		serve  func(http.ResponseWriter)
		status int
		code   string
	}{
		{func(w http.ResponseWriter) { c.Deny(w, r, "req-9", "bad_ua") }, 403, "bad_ua"},
		{func(w http.ResponseWriter) { c.RateLimited(w, r, "req-9", 3*time.Second) }, 429, "rate_limited"},
		{func(w http.ResponseWriter) { c.Error(w, r, 504, "req-9", "upstream_timeout") }, 504, "upstream_timeout"},
	} {
		w := httptest.NewRecorder()
		tt.serve(w)
		var v struct {
			Error     string `json:"error"`
			RequestID string `json:"request_id"`
		}
		if w.Code != tt.status || isHTML(w) || json.Unmarshal(w.Body.Bytes(), &v) != nil || v.Error != tt.code || v.RequestID != "req-9" {
			t.Errorf("status %d, body %s", w.Code, w.Body)
		}
	}
}
