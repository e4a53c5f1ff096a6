package certs_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/maatproxy/maat/certs"
)

// cacheEntry encodes a certificate the way the ACME cache stores it: the
// key of keyOf, then the chain of chainOf (usually the same).
func cacheEntry(t testing.TB, keyOf, chainOf *tls.Certificate) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(keyOf.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	for _, der := range chainOf.Certificate {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return b
}

// cachedACME returns an ACME Manager for name whose cache holds entry; its
// CA is unreachable.
func cachedACME(t testing.TB, name string, entry []byte, now func() time.Time) *certs.Manager {
	t.Helper()
	dir := t.TempDir()
	if entry != nil {
		if err := certs.DirCache(dir).Put(context.Background(), name, entry); err != nil {
			t.Fatal(err)
		}
	}
	m, err := certs.New(certs.Config{
		Mode:         certs.ModeACME,
		CacheDir:     dir,
		Hosts:        []string{name},
		DirectoryURL: "http://127.0.0.1:1/dir", // nothing listens: any order fails at once
		Now:          now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestACMECacheEntries(t *testing.T) {
	t.Parallel()
	const name = "cache.maat.test"
	good := leafFor(t, name)
	other := leafFor(t, "other.maat.test")
	tests := []struct {
		name  string
		entry []byte
		now   func() time.Time
		want  bool // the cached certificate is served
	}{
		{name: "valid", entry: cacheEntry(t, good, good), want: true},
		{name: "missing"},
		{name: "garbage", entry: []byte("not PEM")},
		{name: "for another name", entry: cacheEntry(t, other, other)},
		{name: "key of another certificate", entry: cacheEntry(t, other, good)},
		{name: "expired", entry: cacheEntry(t, good, good), now: func() time.Time { return time.Now().Add(365 * 24 * time.Hour) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := cachedACME(t, name, tt.entry, tt.now)
			st := m.Status()
			now := time.Now()
			if tt.now != nil {
				now = tt.now()
			}
			if got := len(st) == 1 && st[0].Ready(now); got != tt.want {
				t.Errorf("ready = %v, want %v (status %+v)", got, tt.want, st)
			}
			c, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: name})
			if tt.want && (err != nil || !c.Leaf.Equal(good.Leaf)) {
				t.Errorf("GetCertificate() = %v, want the cached certificate", err)
			}
			if !tt.want && err == nil {
				t.Error("GetCertificate() served a certificate with nothing usable cached and no CA")
			}
		})
	}
}

// BenchmarkGetCertificate measures the handshake-time lookup of a
// certificate already held.
func BenchmarkGetCertificate(b *testing.B) {
	const name = "bench.maat.test"
	self, err := certs.New(certs.Config{Hosts: []string{name}})
	if err != nil {
		b.Fatal(err)
	}
	c, err := self.GetCertificate(&tls.ClientHelloInfo{ServerName: name})
	if err != nil {
		b.Fatal(err)
	}
	bench := []struct {
		name string
		m    *certs.Manager
	}{
		{name: "acme", m: cachedACME(b, name, cacheEntry(b, c, c), nil)},
		{name: "self-signed", m: self},
	}
	for _, bb := range bench {
		b.Run(bb.name, func(b *testing.B) {
			hello := &tls.ClientHelloInfo{ServerName: name}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bb.m.GetCertificate(hello); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
