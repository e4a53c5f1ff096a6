package certs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/maatproxy/maat/certs"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     certs.Config
		wantErr int // number of problems reported
	}{
		{name: "zero", cfg: certs.Config{}},
		{name: "self-signed any host", cfg: certs.Config{Mode: "self-signed", AnyHost: true}},
		{name: "acme", cfg: certs.Config{Mode: "acme", CacheDir: "/var/lib/edge", Hosts: []string{"example.org", "www.example.org"}}},
		{name: "acme custom cache", cfg: certs.Config{Mode: "acme", Cache: certs.DirCache("/tmp/x"), Hosts: []string{"example.org"}}},
		{name: "files", cfg: certs.Config{Mode: "files", CertFile: "c.pem", KeyFile: "k.pem"}},
		{name: "unknown mode", cfg: certs.Config{Mode: "manual"}, wantErr: 1},
		{name: "acme without hosts or cache", cfg: certs.Config{Mode: "acme"}, wantErr: 2},
		{name: "acme wildcard, upper case, dotless", cfg: certs.Config{Mode: "acme", CacheDir: "d", Hosts: []string{"*.example.org", "Example.org", "intranet"}}, wantErr: 3},
		{name: "acme trailing dot", cfg: certs.Config{Mode: "acme", CacheDir: "d", Hosts: []string{"example.org."}}, wantErr: 1},
		{name: "acme half EAB", cfg: certs.Config{Mode: "acme", CacheDir: "d", Hosts: []string{"example.org"}, EAB: &certs.EAB{KeyID: "kid"}}, wantErr: 1},
		{name: "any host outside self-signed", cfg: certs.Config{Mode: "files", CertFile: "c", KeyFile: "k", AnyHost: true}, wantErr: 1},
		{name: "files without files", cfg: certs.Config{Mode: "files"}, wantErr: 1},
		{name: "retry bounds", cfg: certs.Config{RetryMin: time.Hour, RetryMax: time.Minute, RenewBefore: -1}, wantErr: 2},
		{name: "empty host", cfg: certs.Config{Hosts: []string{""}}, wantErr: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			var n int
			if err != nil {
				if !errors.Is(err, certs.ErrInvalidConfig) {
					t.Errorf("Validate() = %v, does not wrap ErrInvalidConfig", err)
				}
				n = 1
				if j, ok := err.(interface{ Unwrap() []error }); ok {
					n = len(j.Unwrap())
				}
			}
			if n != tt.wantErr {
				t.Errorf("Validate() = %v: %d problems, want %d", err, n, tt.wantErr)
			}
			if _, err := certs.New(tt.cfg); tt.wantErr > 0 && !errors.Is(err, certs.ErrInvalidConfig) {
				t.Errorf("New() = %v, want ErrInvalidConfig", err)
			}
		})
	}
}
