package edge

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/maatproxy/maat/edge/config"
)

// TestLoadConfigFingerprintDefault: a file that does not name a
// fingerprint log gets the default; "off" and "" turn it off; ParseConfig
// (configurations made in code) leaves it off.
func TestLoadConfigFingerprintDefault(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const site = "sites: [{hosts: [a.test], upstream: 'http://127.0.0.1:1'}]\n"
	for _, tt := range []struct{ name, log, want string }{
		{"absent", "", config.DefaultFingerprintLog},
		{"off", "log: {fingerprints: off}\n", ""},
		{"empty", "log: {fingerprints: \"\"}\n", ""},
		{"stdout", "log: {fingerprints: \"-\"}\n", "-"},
		{"a file", "log: {fingerprints: /srv/fp.jsonl}\n", "/srv/fp.jsonl"},
	} {
		p := filepath.Join(dir, tt.name+".yaml")
		if err := os.WriteFile(p, []byte(tt.log+site), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(p)
		if err != nil || cfg.Log.Fingerprints != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.name, cfg.Log.Fingerprints, err, tt.want)
		}
	}
	if cfg, err := config.Parse("p.yaml", []byte(site)); err != nil || cfg.Log.Fingerprints != "" {
		t.Errorf("ParseConfig: %q, %v; want off", cfg.Log.Fingerprints, err)
	}
	if cfg, err := DemoConfig(DemoOptions{Upstream: "http://127.0.0.1:1"}); err != nil || cfg.Log.Fingerprints != "./edge-fp.jsonl" {
		t.Errorf("demo: %q, %v", cfg.Log.Fingerprints, err)
	}
}
