package edge

import (
	"fmt"
	"time"

	"github.com/maatproxy/maat/edge/config"
)

// DemoOptions are the flags of `edge demo`.
type DemoOptions struct {
	Addr     string // default "localhost:8443"
	Upstream string // required: the demo application's URL, or the operator's own app
	FPLog    string // default "./edge-fp.jsonl"
}

// DemoConfig returns the embedded configuration of `edge demo`: HTTPS,
// HTTP/2 and HTTP/3 with a self-signed certificate for any name, the default
// policy, one site answering every host.
func DemoConfig(o DemoOptions) (config.Config, error) {
	if o.Addr == "" {
		o.Addr = "localhost:8443"
	}
	if o.FPLog == "" {
		o.FPLog = "./edge-fp.jsonl"
	}
	up, err := config.ParseUpstream(o.Upstream)
	if err != nil {
		return config.Config{}, fmt.Errorf("edge: -upstream: %w", err)
	}
	cfg := config.Default()
	cfg.Demo = true
	cfg.File = "(demo)"
	cfg.Listen = config.Listen{HTTPS: o.Addr}
	cfg.TLS = config.TLSConfig{Mode: "self-signed"}
	cfg.Sites = []config.Site{{Upstream: config.Upstreams{up}}}
	cfg.Log.Fingerprints = o.FPLog
	cfg.Timeouts.Drain = config.Duration(5 * time.Second)
	err = cfg.Validate() // before cfg is copied out: New takes it as validated
	return cfg, err
}
