package edge

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maatproxy/maat/challenge"
	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/edge/internal/upstream"
	"github.com/maatproxy/maat/policy"
)

// A site's pressure is one number from 0 (idle) to 1 (saturated) of the
// upstreams its routes send to: the most pressed of its pools,
//
//	pressure = clamp(max(0.75·in_use/capacity, queue/capacity,
//	                     queue_wait/limits.upstream_queue), 0, 1)
//
// Busy slots alone reach 0.75; above it, requests wait in the edge's line,
// and a line as long as the slots are many, or a request that has waited
// all of upstream_queue, is 1. Storm mode follows it with hysteresis
// (storm.on, storm.off, storm.hold). docs/configuration.md ("storm")
// documents both.

// pressureEvery is how often a site's pressure is measured again: the
// requests of the site between two measurements read the last one.
const pressureEvery = 100 * time.Millisecond

// pressureOf is the formula above for one pool's stats.
func pressureOf(s upstream.Stats, queueTimeout time.Duration) float64 {
	if s.Capacity <= 0 {
		return 0
	}
	p := 0.75 * float64(s.InUse) / float64(s.Capacity)
	p = max(p, float64(s.Queue)/float64(s.Capacity))
	if queueTimeout > 0 {
		p = max(p, float64(s.QueueWait)/float64(queueTimeout))
	}
	return min(max(p, 0), 1)
}

// stormState is storm mode's hysteresis: on once the pressure has stayed
// at on or above for rise; off once it has stayed below off for hold. It
// is driven by observations (pressure, time), so a test gives it its own
// clock. Observations come with requests, at most every pressureEvery: a
// gap of more than riseGap between two is no evidence that the pressure
// stayed up, and starts the rise's count again.
type stormState struct {
	on, off    float64
	rise, hold time.Duration

	storm    bool
	calmFrom time.Time // when the pressure fell below off, in a storm; zero: not below
	highFrom time.Time // when the pressure reached on, out of a storm; zero: not at on
	last     time.Time // the last observation
}

// riseGap is the longest gap between two observations over which the
// pressure counts as having stayed at on.
const riseGap = 3 * pressureEvery

// observe takes the pressure p measured at now and reports whether the
// site is in storm mode.
func (s *stormState) observe(now time.Time, p float64) bool {
	gap := !s.last.IsZero() && now.Sub(s.last) > riseGap
	s.last = now
	switch {
	case p >= s.on && s.storm:
		s.calmFrom = time.Time{}
	case p >= s.on:
		if s.highFrom.IsZero() || gap {
			s.highFrom = now
		}
		if now.Sub(s.highFrom) >= s.rise {
			s.storm, s.calmFrom, s.highFrom = true, time.Time{}, time.Time{}
		}
	case !s.storm:
		s.highFrom = time.Time{}
	case p >= s.off:
		s.calmFrom = time.Time{}
	default: // in a storm, below off
		if s.calmFrom.IsZero() {
			s.calmFrom = now
		}
		if now.Sub(s.calmFrom) >= s.hold {
			s.storm, s.calmFrom = false, time.Time{}
		}
	}
	return s.storm
}

// siteLoad measures one site's pressure: its pools, their latest stats,
// and its storm mode. It belongs to one Handler.
type siteLoad struct {
	pools        []*upstream.Pool
	names        []string // each pool's addresses, for the metrics' upstream label
	queueTimeout time.Duration

	next   atomic.Int64 // UnixNano of the next measurement
	sample atomic.Pointer[loadSample]

	mu       sync.Mutex // guards the fields below
	storm    stormState
	stats    []upstream.Stats // each pool's
	pressure []float64        // each pool's
}

// loadSample is what a request of the site reads: the site's pressure,
// storm mode, and the stats of its most pressed pool.
type loadSample struct {
	pressure float64
	storm    bool
	stats    upstream.Stats
}

func newSiteLoad(pools []*upstream.Pool, names []string, cfg *config.Config) *siteLoad {
	return &siteLoad{pools: pools, names: names, queueTimeout: cfg.Limits.UpstreamQueue.D(),
		storm:    stormState{on: cfg.Storm.On, off: cfg.Storm.Off, rise: cfg.Storm.Rise.D(), hold: cfg.Storm.Hold.D()},
		stats:    make([]upstream.Stats, len(pools)),
		pressure: make([]float64, len(pools))}
}

// read returns the site's load as of now, measured at most pressureEvery
// ago.
func (l *siteLoad) read(now time.Time) loadSample {
	if l == nil {
		return loadSample{}
	}
	if n := now.UnixNano(); n >= l.next.Load() {
		l.next.Store(n + int64(pressureEvery))
		return l.measure(now)
	}
	if s := l.sample.Load(); s != nil {
		return *s
	}
	return l.measure(now)
}

// measure takes the pools' stats now.
func (l *siteLoad) measure(now time.Time) loadSample {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s loadSample
	for i, p := range l.pools {
		st := p.Stats(now)
		pr := pressureOf(st, l.queueTimeout)
		l.stats[i], l.pressure[i] = st, pr
		if i == 0 || pr > s.pressure {
			s.pressure, s.stats = pr, st
		}
	}
	s.storm = l.storm.observe(now, s.pressure)
	l.sample.Store(&s)
	return s
}

// poolLoad is one pool's last measurement, under its name.
type poolLoad struct {
	name     string
	pressure float64
	stats    upstream.Stats
}

// byPool returns each pool's load and the site's storm mode as of now,
// measured at most pressureEvery ago: what the upstream gauges and the
// console show.
func (l *siteLoad) byPool(now time.Time) ([]poolLoad, bool) {
	l.read(now)
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]poolLoad, len(l.stats))
	for i, st := range l.stats {
		out[i] = poolLoad{name: l.names[i], pressure: l.pressure[i], stats: st}
	}
	return out, l.storm.storm
}

// upstreamLoad is the policy's view of stats.
func upstreamLoad(s upstream.Stats) policy.UpstreamLoad {
	return policy.UpstreamLoad{InUse: s.InUse, Capacity: s.Capacity, Queue: s.Queue,
		QueueWaitMs: ms(s.QueueWait), P50Ms: ms(s.P50), P95Ms: ms(s.P95)}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// loadAvg reads the system's load averages (/proc/loadavg) for the
// policy's load_1m, load_5m and load_15m, at most once a second; zeros
// where there is no such file.
type loadAvg struct {
	path string
	next atomic.Int64 // UnixNano of the next read
	last atomic.Pointer[[3]float64]
}

func (a *loadAvg) read(now time.Time) [3]float64 {
	if n := now.UnixNano(); n >= a.next.Load() {
		a.next.Store(n + int64(time.Second))
		v, _ := readLoadAvg(a.path)
		a.last.Store(&v)
		return v
	}
	if v := a.last.Load(); v != nil {
		return *v
	}
	return [3]float64{}
}

// readLoadAvg parses the first three fields of a /proc/loadavg file
// ("0.52 0.58 0.59 2/1187 12345").
func readLoadAvg(path string) ([3]float64, error) {
	var v [3]float64
	b, err := os.ReadFile(path)
	if err != nil {
		return v, err
	}
	f := strings.Fields(string(bytes.TrimSpace(b[:min(len(b), 256)])))
	for i := 0; i < 3 && i < len(f); i++ {
		if x, err := strconv.ParseFloat(f[i], 64); err == nil && x >= 0 {
			v[i] = x
		}
	}
	return v, nil
}

// clusterV6Bits is the IPv6 network a client without a pass or a
// fingerprint counts in, for the line's fair share: a site's /48 (RFC
// 6177), wider than clientnet's /64, since one household's or one cloud
// tenant's addresses are spread over many /64s.
const clusterV6Bits = 48

// clusterKey is the client's cluster, 16 hex digits of SHA-256 of: its
// valid pass cookie (pass, "" without one), else its JA4, HTTP/2
// fingerprint and network (its ASN when known, else its /24 or IPv6 /48).
func clusterKey(pass, ja4, h2fp string, asn uint32, client netip.Addr) string {
	var buf [512]byte
	b := buf[:0]
	if pass != "" {
		b = append(append(b, "pass\x00"...), pass...)
	} else {
		b = append(append(append(append(b, "fp\x00"...), ja4...), 0), h2fp...)
		b = append(b, 0)
		if asn != 0 {
			b = strconv.AppendUint(append(b, "AS"...), uint64(asn), 10)
		} else {
			bits := 24
			a := client.Unmap()
			if a.Is6() {
				bits = clusterV6Bits
			}
			p, _ := a.WithZone("").Prefix(bits)
			b = p.AppendTo(b)
		}
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// passCookie is the pass cookie's value in r's Cookie headers, or "".
func passCookie(r *http.Request) string {
	for _, line := range r.Header["Cookie"] {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			if v, ok := strings.CutPrefix(strings.TrimSpace(part), challenge.CookieName+"="); ok {
				return strings.Trim(v, `"`)
			}
		}
	}
	return ""
}

// checkPressureUsers refuses a policy (the global one or a site's) that
// reads the upstream's pressure for a site with no upstream whose
// pressure could be measured.
func (h *Handler) checkPressureUsers() error {
	cfg := &h.cfg
	static := map[int]bool{}
	for _, i := range cfg.StaticOnlyIndexes() {
		static[i] = true
	}
	var errs []error
	for i, s := range h.sites.list {
		sp := h.policyFor(s)
		if !static[i] || !sp.policy.UsesPressure() {
			continue
		}
		key := "policy"
		if sp.file != "" {
			key = fmt.Sprintf("sites[%d].policy", i)
		}
		errs = append(errs, &config.Error{File: cfg.File, Key: key, Err: fmt.Errorf(
			"%s read the upstream's pressure (pressure, storm or upstream), but sites[%d] (%s) has no upstream (static files only) whose pressure could be measured: give it an upstream, or another policy",
			strings.Join(sp.policy.PressureUsers(), "; "), i, s.name)})
	}
	return errors.Join(errs...)
}
