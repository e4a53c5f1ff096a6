package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/maatproxy/maat/certs"
)

// pemBlock returns the bytes of the first PEM block.
func pemBlock(t *testing.T, b []byte) []byte {
	t.Helper()
	p, _ := pem.Decode(b)
	if p == nil {
		t.Fatal("no PEM block")
	}
	return p.Bytes
}

// leafFor returns a certificate for name from a throw-away local CA.
func leafFor(t *testing.T, name string) *tls.Certificate {
	t.Helper()
	m, err := certs.New(certs.Config{AnyHost: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: name})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writePair writes c as cert.pem and key.pem in dir and returns their paths.
func writePair(t *testing.T, dir string, c *tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	var chain []byte
	for _, der := range c.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	if err := os.WriteFile(certFile, chain, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestFilesNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		hosts   []string
		now     time.Time
		corrupt bool
		wantErr bool
	}{
		{name: "matching hosts", hosts: []string{"files.test"}},
		{name: "no hosts"},
		{name: "host not covered", hosts: []string{"files.test", "other.test"}, wantErr: true},
		{name: "expired", now: time.Now().Add(365 * 24 * time.Hour), wantErr: true},
		{name: "corrupt key", corrupt: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := leafFor(t, "files.test")
			certFile, keyFile := writePair(t, t.TempDir(), want)
			if tt.corrupt {
				os.WriteFile(keyFile, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600)
			}
			cfg := certs.Config{Mode: certs.ModeFiles, CertFile: certFile, KeyFile: keyFile, Hosts: tt.hosts}
			if !tt.now.IsZero() {
				cfg.Now = func() time.Time { return tt.now }
			}
			m, err := certs.New(cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("New() error = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			got, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: "anything.test"})
			if err != nil || !got.Leaf.Equal(want.Leaf) {
				t.Errorf("GetCertificate() = %v, %v; want the file's certificate", got, err)
			}
			st := m.Status()
			if len(st) != 1 || st[0].Name != "files.test" || !st[0].NotAfter.Equal(want.Leaf.NotAfter) {
				t.Errorf("Status() = %+v", st)
			}
			if m.RootPEM() != nil {
				t.Error("RootPEM() in mode files is not nil")
			}
		})
	}
}

func TestFilesReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := leafFor(t, "reload.test")
	certFile, keyFile := writePair(t, dir, first)
	var events []certs.Event
	var m *certs.Manager
	m, err := certs.New(certs.Config{Mode: certs.ModeFiles, CertFile: certFile, KeyFile: keyFile,
		OnEvent: func(e certs.Event) {
			events = append(events, e)
			if m != nil {
				m.Status() // a hook may look at the state: no deadlock
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	current := func() *x509.Certificate {
		c, err := m.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf
	}

	// A broken file keeps the current certificate and shows in Status.
	if err := os.WriteFile(keyFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(); err == nil {
		t.Error("Reload() of a broken key succeeded")
	}
	if !current().Equal(first.Leaf) {
		t.Error("a failed Reload replaced the certificate")
	}
	if st := m.Status(); len(st) != 1 || st[0].LastError == "" {
		t.Errorf("Status() after a failed reload = %+v, want the error", st)
	}

	// New files are picked up.
	second := leafFor(t, "reload.test")
	writePair(t, dir, second)
	if err := m.Reload(); err != nil {
		t.Fatalf("Reload() = %v", err)
	}
	if !current().Equal(second.Leaf) {
		t.Error("Reload did not replace the certificate")
	}
	if st := m.Status(); len(st) != 1 || st[0].LastError != "" {
		t.Errorf("Status() after reload = %+v, want no error", st)
	}
	kinds := make([]certs.EventKind, 0, len(events))
	for _, e := range events {
		kinds = append(kinds, e.Kind)
	}
	want := []certs.EventKind{certs.EventLoaded, certs.EventFailed, certs.EventLoaded}
	if len(kinds) != len(want) || kinds[0] != want[0] || kinds[1] != want[1] || kinds[2] != want[2] {
		t.Errorf("events = %v, want %v", kinds, want)
	}
	if !errors.Is(m.Reload(), nil) {
		t.Error("Reload of unchanged files failed")
	}
}
