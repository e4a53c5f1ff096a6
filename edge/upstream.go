package edge

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"sync/atomic"
	"time"
)

// pool is the set of addresses of one route: round robin over the healthy
// ones, with passive health (an address whose dial or connection fails is
// skipped for a pause).
type pool struct {
	targets []*target
	next    atomic.Uint32
	pause   time.Duration
}

type target struct {
	url       *url.URL
	slots     *connSlots   // shared by every route to the same address
	downUntil atomic.Int64 // unix nanoseconds; 0 = healthy
}

func newPool(us Upstreams, pause time.Duration, slots *slotTable) *pool {
	p := &pool{pause: pause, targets: make([]*target, len(us))}
	for i, u := range us {
		p.targets[i] = &target{url: u, slots: slots.forHost(u.Host)}
	}
	return p
}

// pick returns the next healthy address not in skip, or, when every
// address is paused, the one whose pause ends first: a request is tried
// rather than refused outright. It returns nil only when skip holds every
// address.
func (p *pool) pick(now time.Time, skip []*target) *target {
	n := uint32(len(p.targets))
	start := p.next.Add(1) - 1
	var soonest *target
	for i := range n {
		t := p.targets[(start+i)%n]
		if slices.Contains(skip, t) {
			continue
		}
		if t.downUntil.Load() <= now.UnixNano() {
			return t
		}
		if soonest == nil || t.downUntil.Load() < soonest.downUntil.Load() {
			soonest = t
		}
	}
	return soonest
}

// fail pauses the address.
func (p *pool) fail(t *target, now time.Time) { t.downUntil.Store(now.Add(p.pause).UnixNano()) }

// ok marks the address healthy again.
func (p *pool) ok(t *target) {
	if t.downUntil.Load() != 0 {
		t.downUntil.Store(0)
	}
}

// connSlots caps the connections to one upstream address
// (limits.upstream_conns): an exchange holds a slot while it uses a
// connection, and a request beyond the cap waits in line, at most
// limits.upstream_queue, for one. HTTP/1.1 carries one exchange per
// connection, so slots are connections; a small application behind the
// edge sees at most that many, whatever a flood of clients does.
type connSlots struct {
	ch chan struct{}
	// stalled counts the slots held by answers whose client fell behind
	// and whose rest could not be read ahead (spillBody): at most half the
	// slots may be held so, the other half stays for everyone else.
	stalled atomic.Int32
}

// stall counts one more slot held by a client that fell behind, or reports
// false when half the slots already are.
func (s *connSlots) stall() bool {
	if int(s.stalled.Add(1)) > max(1, cap(s.ch)/2) {
		s.stalled.Add(-1)
		return false
	}
	return true
}

func (s *connSlots) unstall() { s.stalled.Add(-1) }

// acquire takes a slot, waiting at most queue (or until ctx ends: a reset
// stream leaves the line at once).
func (s *connSlots) acquire(ctx context.Context, queue time.Duration) error {
	select {
	case s.ch <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(queue)
	defer t.Stop()
	select {
	case s.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return errQueueFull
	}
}

func (s *connSlots) release() { <-s.ch }

// inUse is the number of slots held.
func (s *connSlots) inUse() int { return len(s.ch) }

// slotTable holds one connSlots per upstream address of a Handler.
type slotTable struct {
	size   int
	byHost map[string]*connSlots
}

func (t *slotTable) forHost(host string) *connSlots {
	if s, ok := t.byHost[host]; ok {
		return s
	}
	if t.byHost == nil {
		t.byHost = map[string]*connSlots{}
	}
	s := &connSlots{ch: make(chan struct{}, t.size)}
	t.byHost[host] = s
	return s
}

// upstreamTLSConfigs builds the TLS configuration of every https://
// upstream address from its site's or route's upstream_tls. Validate has
// refused one address with two different settings.
func upstreamTLSConfigs(cfg *Config) (map[string]*tls.Config, error) {
	out := map[string]*tls.Config{}
	add := func(us Upstreams, ut UpstreamTLS) error {
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
				roots, err := loadRoots(ut.CAFile)
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
			if ut == (UpstreamTLS{}) {
				ut = s.UpstreamTLS
			}
			if err := add(r.Upstream, ut); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// loadRoots reads a PEM file of CA certificates.
func loadRoots(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("edge: upstream_tls.ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("edge: upstream_tls.ca_file %s holds no PEM certificate", path)
	}
	return pool, nil
}
