package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/maatproxy/maat/certs"
)

func TestSelfSignedLeaves(t *testing.T) {
	t.Parallel()
	m, err := certs.New(certs.Config{Hosts: []string{"site.test"}})
	if err != nil {
		t.Fatal(err)
	}
	any, err := certs.New(certs.Config{AnyHost: true})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		m       *certs.Manager
		sni     string
		verify  []string // names the leaf must be valid for
		wantErr error
	}{
		{name: "no SNI", m: m, sni: "", verify: []string{"localhost", "127.0.0.1", "::1"}},
		{name: "localhost", m: m, sni: "localhost", verify: []string{"localhost"}},
		{name: "configured", m: m, sni: "site.test", verify: []string{"site.test"}},
		{name: "configured, other case and dot", m: m, sni: "Site.Test.", verify: []string{"site.test"}},
		{name: "unconfigured", m: m, sni: "other.test", wantErr: certs.ErrUnknownHost},
		{name: "any host", m: any, sni: "whatever.example", verify: []string{"whatever.example"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := tt.m.GetCertificate(&tls.ClientHelloInfo{ServerName: tt.sni})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("GetCertificate(%q) error = %v, want %v", tt.sni, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(tt.m.RootPEM()) {
				t.Fatal("RootPEM() is not a PEM certificate")
			}
			for _, name := range tt.verify {
				if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool}); err != nil {
					t.Errorf("leaf for %q does not verify for %q: %v", tt.sni, name, err)
				}
			}
			again, err := tt.m.GetCertificate(&tls.ClientHelloInfo{ServerName: tt.sni})
			if err != nil || again != c {
				t.Errorf("second GetCertificate(%q) = %p, %v; want the cached %p", tt.sni, again, err, c)
			}
		})
	}
}

func TestSelfSignedHandshake(t *testing.T) {
	t.Parallel()
	m, err := certs.New(certs.Config{Mode: certs.ModeSelfSigned})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", m.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
			}()
		}
	}()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(m.RootPEM())
	tests := []struct {
		name       string
		serverName string
		wantErr    bool
	}{
		{name: "IP, no SNI", serverName: "127.0.0.1"},
		{name: "localhost", serverName: "localhost"},
		{name: "unknown name", serverName: "nobody.test", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: tt.serverName, NextProtos: []string{"h2"}})
			if (err != nil) != tt.wantErr {
				t.Fatalf("Dial(%s) error = %v, want error %v", tt.serverName, err, tt.wantErr)
			}
			if err == nil {
				defer c.Close()
				if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
					t.Errorf("ALPN = %q, want h2", p)
				}
				if v := c.ConnectionState().Version; v < tls.VersionTLS12 {
					t.Errorf("TLS version %x below 1.2", v)
				}
			}
		})
	}
}

func TestSelfSignedCA(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cacheDir bool
		sameRoot bool // a second Manager has the same root
	}{
		{name: "cache dir keeps the CA", cacheDir: true, sameRoot: true},
		{name: "memory only", cacheDir: false, sameRoot: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var dir string
			if tt.cacheDir {
				dir = filepath.Join(t.TempDir(), "cache")
			}
			cfg := certs.Config{CacheDir: dir, Now: func() time.Time { return time.Now() }}
			m1, err := certs.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			m2, err := certs.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if same := string(m1.RootPEM()) == string(m2.RootPEM()); same != tt.sameRoot {
				t.Errorf("same root after restart = %v, want %v", same, tt.sameRoot)
			}
			root, err := x509.ParseCertificate(pemBlock(t, m1.RootPEM()))
			if err != nil {
				t.Fatal(err)
			}
			if !root.IsCA || root.PublicKeyAlgorithm != x509.ECDSA {
				t.Errorf("root IsCA = %v, key %v; want an ECDSA CA", root.IsCA, root.PublicKeyAlgorithm)
			}
			if !tt.cacheDir {
				return
			}
			checkMode(t, dir, 0o700)
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 2 {
				t.Errorf("cache holds %d files, want the CA certificate and key", len(entries))
			}
			for _, e := range entries {
				checkMode(t, filepath.Join(dir, e.Name()), 0o600)
			}
		})
	}
}

func checkMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s mode = %v, want %v", path, got, want)
	}
}
