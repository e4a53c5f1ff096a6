package certs_test

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/acme"

	"github.com/maatproxy/maat/certs"
)

// newIdleACME returns an ACME Manager for site.maat.test whose CA counts
// every request it gets.
func newIdleACME(t *testing.T) (*certs.Manager, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	ca := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	t.Cleanup(ca.Close)
	m, err := certs.New(certs.Config{
		Mode:         certs.ModeACME,
		CacheDir:     t.TempDir(),
		Hosts:        []string{"site.maat.test"},
		DirectoryURL: ca.URL + "/dir",
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, &calls
}

func TestACMEHostPolicy(t *testing.T) {
	t.Parallel()
	m, calls := newIdleACME(t)
	tests := []struct {
		name  string
		hello *tls.ClientHelloInfo
	}{
		{name: "unconfigured name", hello: &tls.ClientHelloInfo{ServerName: "evil.maat.test"}},
		{name: "subdomain of a configured name", hello: &tls.ClientHelloInfo{ServerName: "x.site.maat.test"}},
		{name: "no server name", hello: &tls.ClientHelloInfo{}},
		{name: "tls-alpn-01 for an unconfigured name", hello: &tls.ClientHelloInfo{ServerName: "evil.maat.test", SupportedProtos: []string{acme.ALPNProto}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := m.GetCertificate(tt.hello); !errors.Is(err, certs.ErrUnknownHost) {
				t.Errorf("GetCertificate() = %v, want ErrUnknownHost", err)
			}
		})
	}
	t.Cleanup(func() {
		if n := calls.Load(); n != 0 {
			t.Errorf("the CA got %d requests for unconfigured names", n)
		}
	})
}

func TestACMETLSConfig(t *testing.T) {
	t.Parallel()
	m, _ := newIdleACME(t)
	c := m.TLSConfig()
	if c.MinVersion != tls.VersionTLS12 || c.GetCertificate == nil {
		t.Errorf("TLSConfig() MinVersion %x, GetCertificate set %v", c.MinVersion, c.GetCertificate != nil)
	}
	if want := []string{"h2", "http/1.1", acme.ALPNProto}; !slices.Equal(c.NextProtos, want) {
		t.Errorf("NextProtos = %q, want %q", c.NextProtos, want)
	}
	// A challenge hello for a configured name with no pending challenge.
	_, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: "site.maat.test", SupportedProtos: []string{acme.ALPNProto}})
	if err == nil {
		t.Error("GetCertificate() answered a tls-alpn-01 challenge that nobody asked for")
	}
}

func TestHTTPHandler(t *testing.T) {
	t.Parallel()
	acmeM, _ := newIdleACME(t)
	selfM, err := certs.New(certs.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fallback := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})
	tests := []struct {
		name         string
		m            *certs.Manager
		fallback     http.Handler
		method, url  string
		wantStatus   int
		wantLocation string
	}{
		{name: "other path to fallback", m: acmeM, fallback: fallback, method: "GET", url: "http://site.maat.test/x", wantStatus: http.StatusTeapot},
		{name: "redirect by default", m: acmeM, method: "GET", url: "http://site.maat.test:8080/a?b=c", wantStatus: http.StatusFound, wantLocation: "https://site.maat.test/a?b=c"},
		{name: "redirect IPv6", m: acmeM, method: "HEAD", url: "http://[::1]:80/", wantStatus: http.StatusFound, wantLocation: "https://[::1]/"},
		{name: "POST refused by default", m: acmeM, method: "POST", url: "http://site.maat.test/", wantStatus: http.StatusBadRequest},
		{name: "challenge for an unconfigured host", m: acmeM, method: "GET", url: "http://evil.maat.test/.well-known/acme-challenge/abc", wantStatus: http.StatusForbidden},
		{name: "unknown challenge token", m: acmeM, method: "GET", url: "http://site.maat.test/.well-known/acme-challenge/abc", wantStatus: http.StatusNotFound},
		{name: "self-signed: everything to fallback", m: selfM, fallback: fallback, method: "GET", url: "http://site.maat.test/.well-known/acme-challenge/abc", wantStatus: http.StatusTeapot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			tt.m.HTTPHandler(tt.fallback).ServeHTTP(rec, httptest.NewRequest(tt.method, tt.url, nil))
			if rec.Code != tt.wantStatus {
				t.Errorf("status = %d, want %d", rec.Code, tt.wantStatus)
			}
			if got := rec.Header().Get("Location"); got != tt.wantLocation {
				t.Errorf("Location = %q, want %q", got, tt.wantLocation)
			}
		})
	}
}
