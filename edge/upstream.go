package edge

import (
	"crypto/tls"
	"net"

	"github.com/maatproxy/maat/edge/config"
)

// upstreamTLSConfigs builds the TLS configuration of every https://
// upstream address from its site's or route's upstream_tls. Validate has
// refused one address with two different settings.
func upstreamTLSConfigs(cfg *config.Config) (map[string]*tls.Config, error) {
	out := map[string]*tls.Config{}
	add := func(us config.Upstreams, ut config.UpstreamTLS) error {
		for _, u := range us {
			if u == nil || u.Scheme != "https" {
				continue
			}
			host, _, _ := net.SplitHostPort(u.Host)
			c := &tls.Config{ServerName: host, NextProtos: []string{"http/1.1"}, InsecureSkipVerify: ut.InsecureSkipVerify}
			if ut.ServerName != "" {
				c.ServerName = ut.ServerName
			}
			if ut.CAFile != "" {
				roots, err := config.LoadRoots(ut.CAFile)
				if err != nil {
					return err
				}
				c.RootCAs = roots
			}
			out[u.Host] = c
		}
		return nil
	}
	for i := range cfg.Sites {
		s := &cfg.Sites[i]
		if err := add(s.Upstream, s.UpstreamTLS); err != nil {
			return nil, err
		}
		for j := range s.Routes {
			r := &s.Routes[j]
			ut := r.UpstreamTLS
			if ut == (config.UpstreamTLS{}) {
				ut = s.UpstreamTLS
			}
			if err := add(r.Upstream, ut); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
