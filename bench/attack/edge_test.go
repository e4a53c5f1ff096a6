package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/maatproxy/maat/edge/config"
)

// TestConfigReadsAsTheEdgeReads: the configuration the suite writes is
// one the edge accepts, with the route behind basic auth, HTTP/3 on and
// the edge's default limits, or the ones -extra sets.
func TestConfigReadsAsTheEdgeReads(t *testing.T) {
	t.Parallel()
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, extra string
		bodyTimeout time.Duration
	}{
		{"defaults", "", 20 * time.Second},
		{"extra", "limits: {body_timeout: 5s}", 5 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			text := edgeConfig(8443, 9100, dir, "http://127.0.0.1:3000", string(hash), tt.extra)
			cfg, err := config.Parse("edge.yaml", []byte(text))
			if err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			if cfg.Listen.HTTPS != "127.0.0.1:8443" || cfg.Listen.Admin != "127.0.0.1:9100" || cfg.Listen.HTTP != "" {
				t.Errorf("listen = %+v", cfg.Listen)
			}
			if len(cfg.Sites) != 1 || len(cfg.Sites[0].Routes) != 1 || cfg.Sites[0].Routes[0].Path != authPath ||
				cfg.Sites[0].Routes[0].BasicAuth == nil {
				t.Fatalf("sites = %+v", cfg.Sites)
			}
			if got := cfg.Limits.BodyTimeout.D(); got != tt.bodyTimeout {
				t.Errorf("body_timeout = %v, want %v", got, tt.bodyTimeout)
			}
		})
	}
}

func TestProcStats(t *testing.T) {
	t.Parallel()
	rss, cpu, err := procStats(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss < 1<<20 || rss > 64<<30 {
		t.Errorf("RSS %d bytes", rss)
	}
	if cpu < 0 {
		t.Errorf("CPU time %v", cpu)
	}
	if _, _, err := procStats(0); err == nil {
		t.Error("pid 0 read without an error")
	}
}

// TestShortKeepsGivenFlags: -short takes the short counts, but a count
// given on the command line wins, and the holds stay long enough for the
// edge's own timeouts.
func TestShortKeepsGivenFlags(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	o, err := parseFlags([]string{"attack", "-short", "-idle-conns", "7", "-run", "idle"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if o.p.IdleConns != 7 || o.p.ResetStreams != 500 || o.p.Hold != 40*time.Second || !o.run.MatchString("idle") {
		t.Errorf("idle %d, resets %d, hold %v, run %v", o.p.IdleConns, o.p.ResetStreams, o.p.Hold, o.run)
	}
	o, err = parseFlags([]string{"attack"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if o.p.IdleConns != 5000 || o.p.ResetStreams != 20000 {
		t.Errorf("default counts: idle %d, resets %d", o.p.IdleConns, o.p.ResetStreams)
	}
	if _, err := parseFlags([]string{"attack", "stray"}, &out); err == nil {
		t.Error("a stray argument was accepted")
	}
}
