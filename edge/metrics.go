package edge

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/maatproxy/maat/certs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the edge's Prometheus series. No label ever takes a value a
// client chose: sites are named by their first configured host name, and
// every other label has a fixed set of values.
type metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec   // site, action, proto
	challenges   *prometheus.CounterVec   // result (issued|passed|failed), reason
	solve        prometheus.Histogram     // seconds from issue to a good answer, server-measured
	upstream     *prometheus.HistogramVec // site
	upErrors     *prometheus.CounterVec   // site, reason
	clientErrors *prometheus.CounterVec   // site, reason: requests the client spoiled (bad body, too large)
	handshakes   *prometheus.CounterVec   // result (ok|failed|plain_http), proto (tcp|quic)
	limited      *prometheus.CounterVec   // limit: requests and connections refused by a limits: bound
	diverted     *prometheus.CounterVec   // target: requests sent to a divert: target
	refusedEarly *prometheus.CounterVec   // transport (tcp|quic): connections refused at the ClientHello
	dryRun       *prometheus.CounterVec   // site, action: requests a site running dry forwarded, by the action they would have had
	// sites reports the current Handler's sites' load at scrape time: the
	// upstream gauges (site, upstream) and maat_storm (site).
	sites atomic.Pointer[siteTable]
}

// newMetrics registers the series; certStatus, if not nil, reports the
// certificates' expiry at scrape time.
func newMetrics(certStatus func() []certs.NameStatus) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "maat_requests_total", Help: "Requests by site, decision and protocol.",
	}, []string{"site", "action", "proto"})
	m.challenges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "maat_challenges_total", Help: "Challenges issued, passed and failed (by reason).",
	}, []string{"result", "reason"})
	m.solve = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "maat_challenge_solve_seconds", Help: "Time from a challenge's issue to its accepted answer.",
		Buckets: []float64{0.25, 0.5, 1, 2, 4, 8, 16, 32, 64},
	})
	m.upstream = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "maat_upstream_duration_seconds", Help: "Time to the upstream's response header.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
	}, []string{"site"})
	m.upErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "maat_upstream_errors_total", Help: "Upstream exchanges that failed, by reason.",
	}, []string{"site", "reason"})
	m.clientErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "maat_client_errors_total", Help: "Requests the client spoiled (a broken or oversized body), by reason.",
	}, []string{"site", "reason"})
	m.handshakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "maat_tls_handshakes_total", Help: "TLS handshakes by result and transport.",
	}, []string{"result", "transport"})
	certExpiry := prometheus.NewDesc("maat_certificate_expiry_timestamp_seconds",
		"Expiry of the certificate in use, per configured name.", []string{"name"}, nil)
	m.limited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "maat_limited_total", Help: "Requests and connections refused by a limit, by the limit's name.",
	}, []string{"limit"})
	m.diverted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "maat_diverted_total", Help: "Requests a DIVERT rule sent to a divert target, by target.",
	}, []string{"target"})
	m.refusedEarly = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "maat_refused_early_total", Help: "Connections refused at their ClientHello because the policy denies every request on them (limits.refuse_early), by transport.",
	}, []string{"transport"})
	m.refusedEarly.WithLabelValues("tcp")
	m.refusedEarly.WithLabelValues("quic")
	m.dryRun = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "maat_dry_run_total", Help: "Requests forwarded by a site in dry_run, by the action the policy would have taken.",
	}, []string{"site", "action"})
	m.reg.MustRegister(m.loadCollector(), m.dryRun, m.refusedEarly, m.diverted, m.limited, m.requests, m.challenges, m.solve, m.upstream, m.upErrors, m.clientErrors, m.handshakes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectorFunc{desc: certExpiry, collect: func(ch chan<- prometheus.Metric) {
			if certStatus == nil {
				return
			}
			for _, ns := range certStatus() {
				if !ns.NotAfter.IsZero() {
					ch <- prometheus.MustNewConstMetric(certExpiry, prometheus.GaugeValue, float64(ns.NotAfter.Unix()), ns.Name)
				}
			}
		}},
	)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// collectorFunc is a collector whose samples are computed at scrape time.
type collectorFunc struct {
	desc    *prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// addGaugeFunc registers a gauge read at scrape time.
func (m *metrics) addGaugeFunc(name, help string, f func() float64) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// addCounterFunc registers a counter read at scrape time (e.g. log lines).
func (m *metrics) addCounterFunc(name, help string, labels prometheus.Labels, f func() float64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, f))
}

// loadCollector reports the upstream gauges of the current Handler's
// sites (metrics.sites) at scrape time, from their last measurement. Their
// labels are the configured site names and upstream addresses: bounded by
// the configuration.
func (m *metrics) loadCollector() prometheus.Collector {
	site := []string{"site"}
	up := []string{"site", "upstream"}
	descs := [...]*prometheus.Desc{
		prometheus.NewDesc("maat_upstream_pressure", "The upstream's pressure, 0 (idle) to 1 (saturated): docs/configuration.md, storm.", up, nil),
		prometheus.NewDesc("maat_upstream_inuse", "Upstream connection slots in use.", up, nil),
		prometheus.NewDesc("maat_upstream_queue", "Requests waiting in the edge's line for an upstream connection slot.", up, nil),
		prometheus.NewDesc("maat_upstream_capacity", "Upstream connection slots (upstream_conns per address).", up, nil),
		prometheus.NewDesc("maat_storm", "1 while the site is in storm mode (storm.on, storm.off, storm.hold).", site, nil),
	}
	return collectorsFunc{descs: descs[:], collect: func(ch chan<- prometheus.Metric) {
		t := m.sites.Load()
		if t == nil {
			return
		}
		for _, s := range t.list {
			l := s.load
			if l == nil {
				continue
			}
			pools, inStorm := l.byPool(time.Now())
			for _, pl := range pools {
				ch <- prometheus.MustNewConstMetric(descs[0], prometheus.GaugeValue, pl.pressure, s.name, pl.name)
				ch <- prometheus.MustNewConstMetric(descs[1], prometheus.GaugeValue, float64(pl.stats.InUse), s.name, pl.name)
				ch <- prometheus.MustNewConstMetric(descs[2], prometheus.GaugeValue, float64(pl.stats.Queue), s.name, pl.name)
				ch <- prometheus.MustNewConstMetric(descs[3], prometheus.GaugeValue, float64(pl.stats.Capacity), s.name, pl.name)
			}
			storm := 0.0
			if inStorm {
				storm = 1
			}
			ch <- prometheus.MustNewConstMetric(descs[4], prometheus.GaugeValue, storm, s.name)
		}
	}}
}

// collectorsFunc is a collector of several series computed at scrape time.
type collectorsFunc struct {
	descs   []*prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorsFunc) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}
func (c collectorsFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }
