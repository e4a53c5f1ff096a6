package certs

import (
	"crypto/x509"
	"testing"
	"time"
)

func TestRenewAt(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	tests := []struct {
		name        string
		renewBefore time.Duration
		life        time.Duration
		want        time.Duration // after NotBefore
	}{
		{name: "90 days, default", life: 90 * day, want: 60 * day},
		{name: "6 days, default", life: 6 * day, want: 4 * day},
		{name: "1 year, default capped at 30 days", life: 365 * day, want: 335 * day},
		{name: "configured", renewBefore: 10 * day, life: 90 * day, want: 80 * day},
		{name: "configured above half the life", renewBefore: 30 * day, life: 6 * day, want: 3 * day},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := &acmeSource{cfg: &Config{RenewBefore: tt.renewBefore}}
			leaf := &x509.Certificate{NotBefore: start, NotAfter: start.Add(tt.life)}
			if got := a.renewAt(leaf).Sub(start); got != tt.want {
				t.Errorf("renewAt = NotBefore+%v, want +%v", got, tt.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		min, max time.Duration
		want     []time.Duration // after 1, 2, … failures
	}{
		{name: "defaults", want: []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}},
		{name: "configured", min: time.Second, max: 5 * time.Second, want: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}},
		{name: "min above the default max", min: 2 * time.Hour, want: []time.Duration{2 * time.Hour, 2 * time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := &acmeSource{cfg: &Config{RetryMin: tt.min, RetryMax: tt.max}}
			for i, want := range tt.want {
				if got := a.backoff(i + 1); got != want {
					t.Errorf("backoff(%d) = %v, want %v", i+1, got, want)
				}
			}
		})
	}
}
