package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the edge's configuration: the YAML file of DESIGN.md
// ("Configuration file"). Load reads it; the zero value of every field
// has a documented meaning, and Default fills the defaults.
type Config struct {
	Listen       Listen          `yaml:"listen"`
	TLS          TLSConfig       `yaml:"tls"`
	Sites        []Site          `yaml:"sites"`
	Policy       string          `yaml:"policy"` // "" = the built-in default policy
	Challenge    ChallengeConfig `yaml:"challenge"`
	Store        StoreConfig     `yaml:"store"`
	Log          LogConfig       `yaml:"log"`
	Fingerprints Fingerprints    `yaml:"fingerprints"`
	Timeouts     Timeouts        `yaml:"timeouts"`
	Limits       Limits          `yaml:"limits"`
	// Storm switches storm mode of each site on and off by its upstreams'
	// pressure, with hysteresis (the policy's storm variable, and
	// challenge.when: storm).
	Storm Storm     `yaml:"storm"`
	Geo   GeoConfig `yaml:"geo"`
	// Divert names the upstreams a policy's DIVERT rules send requests to
	// (a tarpit such as iocaine or Nepenthes) instead of the site's.
	Divert         map[string]DivertTarget `yaml:"divert"`
	TrustedProxies []Prefix                `yaml:"trusted_proxies"` // CIDRs whose X-Forwarded-For is believed
	// DryRun forwards every request as if the policy allowed it, and logs
	// (fingerprint log dry_run: true) and counts what it would have done:
	// to watch a new policy before enforcing it. A site's dry_run
	// overrides it. Default false.
	DryRun bool `yaml:"dry_run"`
	// Procs is how many processors the edge runs Go code on: "all" (the
	// default: what Go's runtime chooses, GOMAXPROCS) or "adaptive" (all
	// until the edge has used less than half a processor for 5 s, then one
	// until it uses more than three quarters of it: edge/internal/procs).
	// A reload switches it.
	Procs string `yaml:"procs"`

	// Demo marks the embedded `edge demo` configuration: every host is
	// answered and the demo upstream is told the request's fingerprints.
	Demo bool `yaml:"-"`
	// File is the file the configuration was read from, named in its
	// errors ("" when built in code). Load and Parse set it.
	File string `yaml:"-"`

	// lines says where each key was written in that file (nil when built
	// in code, or when the file was not YAML).
	lines keyLines
	// decodeErr holds the values Read could not decode.
	decodeErr error
	// valid marks a Config that Validate found valid (see Validated).
	valid bool
}

// Listen names the listening addresses.
type Listen struct {
	HTTPS string `yaml:"https"` // TCP (HTTP/1.1, HTTP/2) and UDP (HTTP/3); default ":443"
	HTTP  string `yaml:"http"`  // ACME HTTP-01 and redirect to https; "" disables; default ":80"
	Admin string `yaml:"admin"` // the console (/), /healthz, /readyz, /metrics; "" disables; default "127.0.0.1:9100"
	// AdminAuth, if set, asks for this user name and password (HTTP Basic
	// authentication) on the admin listener's console and /metrics;
	// /healthz and /readyz stay open for probes.
	AdminAuth *AdminAuth `yaml:"admin_auth"`
	// AdminPprof serves Go's profiles (net/http/pprof) under /debug/pprof/
	// on the admin listener, behind admin_auth like the console; off by
	// default. A reload turns it on or off.
	AdminPprof bool `yaml:"admin_pprof"`
	// HTTP3 serves HTTP/3 on the UDP port of the same number as https's;
	// false turns it off. If absent, true.
	HTTP3 *bool `yaml:"http3"`
	// ProxyProtocol expects a PROXY protocol v1 or v2 header on every TCP
	// connection of the https listener (for an L4 balancer in front).
	ProxyProtocol bool `yaml:"proxy_protocol"`
}

// HTTP3Enabled reports whether HTTP/3 is on: HTTP3's default is true.
func (l *Listen) HTTP3Enabled() bool { return l.HTTP3 == nil || *l.HTTP3 }

// Same reports whether two Listen sections bind the same listeners.
func (l *Listen) Same(o *Listen) bool {
	return l.HTTPS == o.HTTPS && l.HTTP == o.HTTP && l.Admin == o.Admin &&
		l.HTTP3Enabled() == o.HTTP3Enabled() && l.ProxyProtocol == o.ProxyProtocol
}

// AdminAuth is the admin listener's one user (listen.admin_auth).
type AdminAuth struct {
	User     string `yaml:"user"`
	Password string `yaml:"password"` // the password itself: write it as ${file:…} or ${env:…}
}

// TLSConfig chooses where certificates come from.
type TLSConfig struct {
	Mode     string     `yaml:"mode"` // acme | self-signed | files; default acme
	ACME     ACMEConfig `yaml:"acme"`
	Cache    string     `yaml:"cache"` // certificates and keys; default /var/lib/edge
	CertFile string     `yaml:"cert_file"`
	KeyFile  string     `yaml:"key_file"`
}

// ACMEConfig configures the ACME client.
type ACMEConfig struct {
	Email     string `yaml:"email"`
	Directory string `yaml:"directory"` // "" = the public production CA
	CARoots   string `yaml:"ca_roots"`  // PEM file to trust for a test CA's directory
	EABKeyID  string `yaml:"eab_key_id"`
	EABKey    string `yaml:"eab_hmac_key"` // base64url, as CAs hand it out
}

// Site is one website: its host names, its upstream and optional routes.
type Site struct {
	Hosts    []string  `yaml:"hosts"`
	Upstream Upstreams `yaml:"upstream"`
	// UpstreamTLS configures https:// upstreams of the site (and of its
	// routes that set none).
	UpstreamTLS UpstreamTLS `yaml:"upstream_tls"`
	// UpstreamConns caps the connections to each address of the site's
	// upstream (and of its routes that set none), as limits.upstream_conns
	// does for all: the requests the application serves at once. 0 =
	// limits.upstream_conns.
	UpstreamConns int     `yaml:"upstream_conns"`
	Routes        []Route `yaml:"routes"`
	// MaxBodyBytes caps request bodies; 0 = no cap (bodies stream).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// Root serves static files from a directory instead of an upstream.
	Root string `yaml:"root"`
	// Browse lists directories without an index file (with Root). Default false.
	Browse bool `yaml:"browse"`
	// Errors are the site root's error pages, as a route's (see Route).
	Errors map[int]string `yaml:"errors"`
	// Compress compresses responses (zstd, br, gzip, as the client accepts)
	// of compressible types; responses already encoded pass as they are.
	// Default true.
	Compress *bool `yaml:"compress"`

	// Canonical, if set, is the host name every other host of the site
	// redirects to (301), e.g. www.example.org → example.org.
	Canonical string `yaml:"canonical"`
	// Redirects are answered by the edge before the policy runs.
	Redirects []Redirect `yaml:"redirects"`
	// HSTS is sent on every HTTPS response. If absent, one year for ACME
	// sites and off otherwise; max_age: 0s turns it off.
	HSTS *HSTS `yaml:"hsts"`
	// SecurityHeaders adds X-Content-Type-Options: nosniff and
	// Referrer-Policy: strict-origin-when-cross-origin where the upstream set
	// none. Default false.
	SecurityHeaders bool `yaml:"security_headers"`
	// Headers are the site's header rules (routes add their own after).
	Headers HeaderRules `yaml:"headers"`
	// Maintenance answers every request (but /.maat/) with a 503 page.
	Maintenance bool `yaml:"maintenance"`
	// AccessLog writes one line per request of the site, rotated and with
	// client addresses as log.client_ip says.
	AccessLog *AccessLog `yaml:"access_log"`
	// Policy is the site's policy file; "" = the global policy. Sites that
	// name the same file share one compiled policy.
	Policy string `yaml:"policy"`
	// DryRun, if set, overrides the global dry_run for the site.
	DryRun *bool `yaml:"dry_run"`
}

// DryRunEnabled reports whether the site runs dry: its own dry_run, or
// else global (the configuration's).
func (s *Site) DryRunEnabled(global bool) bool {
	if s.DryRun != nil {
		return *s.DryRun
	}
	return global
}

// CompressEnabled reports whether the site compresses: Compress's default
// is true.
func (s *Site) CompressEnabled() bool { return s.Compress == nil || *s.Compress }

// AccessLog is a site's access log.
type AccessLog struct {
	Path   string `yaml:"path"`   // "-" = stdout
	Format string `yaml:"format"` // combined (default; GoAccess, fail2ban) | json
}

// Route sends a path prefix to other upstreams.
type Route struct {
	Path     string    `yaml:"path"`
	Upstream Upstreams `yaml:"upstream"`
	// UpstreamTLS configures the route's https:// upstreams; if empty, the
	// site's.
	UpstreamTLS UpstreamTLS `yaml:"upstream_tls"`
	// UpstreamConns caps the connections to each of the route's upstream
	// addresses; 0 = the site's.
	UpstreamConns int `yaml:"upstream_conns"`
	// Root serves static files from a directory instead of an upstream. The
	// request's whole path is looked up under it, as nginx's root and
	// Caddy's file_server do (path /docs/, root /srv/www: the request
	// /docs/a.html is /srv/www/docs/a.html), unless StripPrefix.
	Root   string `yaml:"root"`
	Browse bool   `yaml:"browse"`
	// StripPrefix takes the route's path off before the lookup, as nginx's
	// alias does (path /docs/, root /srv/docs: /docs/a.html is
	// /srv/docs/a.html). Default false.
	StripPrefix bool `yaml:"strip_prefix"`
	// Errors names pages under Root answered, with their status, instead of
	// the plain text of a 400, 403, 404, 405 or 500 (nginx's error_page,
	// Caddy's handle_errors), e.g. {404: /404.html}. Without an entry
	// for 404, a 404.html at the top of Root answers 404s (looked for
	// when the configuration loads).
	Errors map[int]string `yaml:"errors"`
	// BasicAuth asks for a user and password (bcrypt hashes), after the bot
	// policy has let the request through.
	BasicAuth *BasicAuth `yaml:"basic_auth"`
	// MatchCase makes the route's path match in its case only. If nil, true
	// for a route without BasicAuth and false for one with it: "/ADMIN/"
	// is then under "/admin/", as it is for an upstream on a
	// case-insensitive disk (IIS, macOS) that would serve it.
	MatchCase *bool `yaml:"match_case"`
	// Headers are the route's header rules, applied after the site's.
	Headers HeaderRules `yaml:"headers"`
}

// Redirect sends a path (exact, or a prefix when it ends in "/") elsewhere.
type Redirect struct {
	From   string `yaml:"from"`
	To     string `yaml:"to"`     // a path, or an absolute https:// URL
	Status int    `yaml:"status"` // 301, 302, 307 or 308; default 301
}

// HSTS is the Strict-Transport-Security header of a site.
type HSTS struct {
	MaxAge            Duration `yaml:"max_age"`
	IncludeSubdomains bool     `yaml:"include_subdomains"`
	Preload           bool     `yaml:"preload"`
}

// HeaderRules set, add or remove headers of requests (to the upstream) and
// responses (to the client).
type HeaderRules struct {
	Request  HeaderOps `yaml:"request"`
	Response HeaderOps `yaml:"response"`
}

// HeaderOps are the three operations, applied remove, set, add.
type HeaderOps struct {
	Set    map[string]string `yaml:"set"`
	Add    map[string]string `yaml:"add"`
	Remove []string          `yaml:"remove"`
}

// BasicAuth protects a route with HTTP Basic authentication (RFC 7617).
type BasicAuth struct {
	Realm string            `yaml:"realm"` // default "restricted"
	Users map[string]string `yaml:"users"` // user → bcrypt hash ($2a$, $2b$, $2y$)
}

// UpstreamTLS is how the edge verifies an https:// upstream. The zero value
// verifies it against the system's roots, as a browser would.
type UpstreamTLS struct {
	// CAFile is a PEM file of roots to trust instead of the system's (a
	// private CA's).
	CAFile string `yaml:"ca_file"`
	// ServerName is the name to verify the certificate for; if empty, the
	// upstream URL's host.
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify accepts any certificate (a self-signed backend on
	// the same host). Off by default; prefer CAFile.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// Upstreams is one upstream URL or a list of them (round robin, passive
// health). In YAML a single string or a sequence.
type Upstreams []*url.URL

// ChallengeConfig configures challenges and the pass cookie.
type ChallengeConfig struct {
	SecretFile string   `yaml:"secret_file"` // HMAC key; generated on first start; "" = random per process
	PassTTL    Duration `yaml:"pass_ttl"`    // default 24h
	Bind       []string `yaml:"bind"`        // ip_prefix, ja4; default both
	// TemplateDir holds *.html templates and a static/ folder that replace
	// the built-in look of the challenge, deny and error pages (logo,
	// colours); "" = the built-in pages.
	TemplateDir string `yaml:"template_dir"`
	// Contact and PolicyURL are shown on failure pages.
	Contact   string `yaml:"contact"`
	PolicyURL string `yaml:"policy_url"`
	// Wait is the no-JavaScript wait.
	Wait WaitConfig `yaml:"wait"`
	// When is a CEL condition (the policy's variables: pressure, storm,
	// load_1m, …) under which the policy's challenges are served; while
	// it is false, a CHALLENGE for a client no lie-detection signal fired
	// on is let through (ALLOW, logged with reason
	// challenge_off_calm). "" = always.
	When string `yaml:"when"`
}

// Storm is storm mode's hysteresis: a site enters it when its pressure
// reaches On, and leaves it once the pressure has stayed below Off for
// Hold.
type Storm struct {
	On  float64 `yaml:"on"`  // default 0.5
	Off float64 `yaml:"off"` // default 0.2
	// Rise is how long the pressure must stay at on or above before storm
	// mode begins, so that one page's burst of parts on a fast
	// application does not turn it on; default 500ms, 0s: at once.
	Rise Duration `yaml:"rise"`
	Hold Duration `yaml:"hold"` // default 30s
}

// WaitConfig says who is offered the no-JavaScript wait instead of the proof
// of work, and how long it lasts.
type WaitConfig struct {
	// MaxWeight: the wait is offered to a client whose TLS (and HTTP/2)
	// fingerprint agrees with the browser its User-Agent claims, on which
	// no lie-detection signal fired, and whose weight is below MaxWeight.
	// 0 = the upper bound of the policy's lowest challenge threshold (20
	// for the default policy); -1 = never (a policy's metarefresh rules
	// still wait).
	MaxWeight int `yaml:"max_weight"`
	// Duration is the wait at weight 0; it grows with the weight, to twice
	// Duration at MaxWeight. Default 5s.
	Duration Duration `yaml:"duration"`
}

// GeoConfig names the local MMDB files (MaxMind's GeoLite2, DB-IP Lite,
// IPinfo Lite) the policy's asns:, geoip: and CEL asn and country read.
type GeoConfig struct {
	ASNDB     string `yaml:"asn_db"`     // "" = no ASN data
	CountryDB string `yaml:"country_db"` // "" = no country data
}

// DivertTarget is an upstream for DIVERT rules, bounded so that the
// requests sent there cost the edge little.
type DivertTarget struct {
	Upstream Upstreams `yaml:"upstream"`
	// MaxConcurrent caps the requests diverted there at once; beyond it the
	// request is denied. Default 32.
	MaxConcurrent int `yaml:"max_concurrent"`
	// MaxBytes caps each diverted response's body. Default 1 MiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxDuration caps each diverted exchange. Default 60s.
	MaxDuration Duration `yaml:"max_duration"`
}

// StoreConfig chooses the shared-state store.
type StoreConfig struct {
	Kind string `yaml:"kind"` // memory | redis; default memory
	URL  string `yaml:"url"`  // redis://host:port/db
}

// LogConfig configures logs.
type LogConfig struct {
	Level  string `yaml:"level"`  // debug | info | warn | error; default info
	Format string `yaml:"format"` // text | json; "" = text on a terminal, JSON otherwise
	// Fingerprints is the fingerprint log: a file, "-" for stdout, "off"
	// (or "") for none. Absent from a file Load reads, it is
	// DefaultFingerprintLog; Parse leaves it off.
	Fingerprints string  `yaml:"fingerprints"`
	MaxSizeMB    int     `yaml:"max_size_mb"`  // default 100
	MaxFiles     int     `yaml:"max_files"`    // default 10
	ClientIP     string  `yaml:"client_ip"`    // full | prefix | hash | none; default full
	SampleAllow  float64 `yaml:"sample_allow"` // share of ALLOW lines kept; 0 = all
}

// Fingerprints switches optional fingerprints on.
type Fingerprints struct {
	JA4H bool `yaml:"ja4h"` // FoxIO License 1.1; off by default
	// TicketJA4: the session tickets the edge issues carry the JA4 of the
	// session's full handshake, and a resumed connection is judged by it
	// (tlsfp.SessionConfig). nil (absent) = on; false = crypto/tls's own
	// tickets, a resumed connection judged by its hello without
	// pre_shared_key and early_data.
	TicketJA4 *bool `yaml:"ticket_ja4"`
}

// TicketJA4On reports whether fingerprints.ticket_ja4 is on (the default).
func (f Fingerprints) TicketJA4On() bool { return f.TicketJA4 == nil || *f.TicketJA4 }

// Timeouts bound what clients and upstreams may take.
type Timeouts struct {
	Handshake    Duration `yaml:"handshake"`     // TLS handshake incl. PROXY header; default 10s
	ReadHeader   Duration `yaml:"read_header"`   // default 10s
	Idle         Duration `yaml:"idle"`          // keep-alive idle; default 120s
	UpstreamDial Duration `yaml:"upstream_dial"` // default 5s
	// UpstreamHeader bounds the wait for the upstream's response header
	// (nginx's proxy_read_timeout, 60s, bounds it too). Default 60s; 0s:
	// no bound.
	UpstreamHeader Duration `yaml:"upstream_header"`
	Drain          Duration `yaml:"drain"`      // in-flight requests on SIGTERM; default 30s
	FailPause      Duration `yaml:"fail_pause"` // a failing upstream address is skipped this long; default 10s

	// UpstreamRead bounds the wait between two reads of an upstream's
	// answer body (nginx's proxy_read_timeout); beyond it the answer is
	// cut. Websockets and server-sent events are not bounded by it.
	// Default 60s; 0s: no bound.
	UpstreamRead Duration `yaml:"upstream_read"`
}

// Limits bound what one client, or all of them together, can hold of the
// edge and of the upstreams (DESIGN.md, "Request hygiene", the last point).
// Each has a default a small site can live with.
type Limits struct {
	// HeaderBytes caps a request's header section (HTTP/1.1 head, HTTP/2
	// and HTTP/3 decoded header list); beyond it the answer is 431.
	// Default 64 KiB.
	HeaderBytes int `yaml:"header_bytes"`
	// H2Streams caps the concurrent streams of one HTTP/2 connection (and
	// the concurrent requests of one HTTP/3 connection). Default 128.
	H2Streams int `yaml:"h2_streams"`
	// ConnsPerClient caps the TCP connections one client address (an IPv4
	// address, an IPv6 /64) holds at once; trusted proxies are exempt.
	// Default 256: a browser uses a handful, a NAT of an office more.
	ConnsPerClient int `yaml:"conns_per_client"`
	// RequestsPerClient caps the requests one client has in flight at once,
	// over all its connections and protocols; beyond it the answer is 429.
	// Default 256.
	RequestsPerClient int `yaml:"requests_per_client"`
	// UpstreamConns caps the connections to each upstream address, those
	// of streams apart (UpstreamStreams); requests beyond it wait in line
	// for a free one, where the edge orders them (by client cluster, pass
	// holders first). Default 8: conservative, so that the line forms in
	// the edge rather than in the application.
	UpstreamConns int `yaml:"upstream_conns"`
	// UpstreamQueue is how long a request waits for a free upstream
	// connection before it is answered 503 with Retry-After. Default 10s.
	UpstreamQueue Duration `yaml:"upstream_queue"`
	// UpstreamQueueLen caps the requests waiting for each upstream
	// address's connections. The line is shared by client cluster: when it
	// is full, the cluster with the most requests in it loses its newest
	// (503 with Retry-After). 0 = 8 times the address's upstream_conns,
	// and at least 512.
	UpstreamQueueLen int `yaml:"upstream_queue_len"`
	// UpstreamStreams caps the streams open to each upstream address
	// (websockets, server-sent events, long polls), which hold none of its
	// upstream_conns; beyond it a new one is answered 503 with
	// Retry-After. Default 1024.
	UpstreamStreams int `yaml:"upstream_streams"`
	// BodyTimeout and BodyMinRate bound how slowly a request body may
	// arrive (Apache's mod_reqtimeout body=20,MinRate=500): within
	// BodyTimeout, extended by a second per BodyMinRate bytes received; a
	// body that falls behind is answered 408. Defaults 20s and 500 bytes
	// per second; body_timeout: 0s turns the bound off.
	BodyTimeout Duration `yaml:"body_timeout"`
	BodyMinRate int      `yaml:"body_min_rate"`
	// WriteTimeout bounds each write of a response to the client (nginx's
	// send_timeout): a client that stops reading is dropped after it.
	// Default 30s; 0s turns it off. Websockets are not bounded by it.
	WriteTimeout Duration `yaml:"write_timeout"`
	// SpillBytes and SpillTotal bound the buffering of responses for slow
	// clients: when a write to a client blocks, the rest of the upstream's
	// answer is read ahead into memory and a temporary file, so that the
	// upstream connection is free again (nginx's proxy_buffering), up to
	// SpillBytes per response and SpillTotal for all at once; beyond, the
	// client reads from the upstream at its own pace. Defaults 64 MiB and
	// 1 GiB; spill_total: 0 is the default, -1 turns buffering off.
	SpillBytes int64 `yaml:"spill_bytes"`
	SpillTotal int64 `yaml:"spill_total"`
	// Ranges caps the byte ranges of one Range request; a request with
	// more is served whole (as Apache's MaxRanges does). Default 100.
	Ranges int `yaml:"ranges"`
	// AuthAttempts caps the basic-auth passwords a client may try per
	// minute (each costs a bcrypt); beyond it the answer is 429. Default 10.
	AuthAttempts int `yaml:"auth_attempts"`
	// QUICHandshakes is the number of QUIC handshakes in progress beyond
	// which new clients must first prove their address (a Retry packet,
	// RFC 9000, section 8.1.2); at 16 times as many, new ones are refused.
	// Default 64.
	QUICHandshakes int `yaml:"quic_handshakes"`
	// ParkAfter is how long an idle HTTP/1.1 connection waits before it is
	// parked: its buffers and goroutine given back until its next byte
	// (edge/internal/park). 0s never parks: every connection is held by
	// net/http as it holds it, the standard path. HTTP/2 connections are
	// never parked. Default 250ms.
	ParkAfter Duration `yaml:"park_after"`
	// RefuseEarly refuses, at its ClientHello, a connection every request
	// of which the policy would deny (policy.DenyConn: its fingerprint,
	// address or network alone decides): a TLS access_denied alert before
	// any handshake work, or a QUIC CRYPTO_ERROR 0x131, instead of the
	// deny page after a full handshake. false: such clients get the deny
	// page, later, as every other denial. Default true.
	RefuseEarly bool `yaml:"refuse_early"`
}

// Duration is a time.Duration written as "10s" in YAML.
type Duration time.Duration

// Prefix is a CIDR (or a single address) in YAML.
type Prefix netip.Prefix

// Default returns the defaults that a configuration file overrides.
func Default() Config {
	return Config{
		Listen: Listen{HTTPS: ":443", HTTP: ":80", Admin: "127.0.0.1:9100"},
		TLS:    TLSConfig{Mode: "acme", Cache: "/var/lib/edge"},
		Procs:  "all",
		Challenge: ChallengeConfig{
			PassTTL: Duration(24 * time.Hour),
			Bind:    []string{"ip_prefix", "ja4"},
			Wait:    WaitConfig{Duration: Duration(5 * time.Second)},
		},
		Store: StoreConfig{Kind: "memory"},
		Storm: Storm{On: 0.5, Off: 0.2, Rise: Duration(500 * time.Millisecond), Hold: Duration(30 * time.Second)},
		Log:   LogConfig{Level: "info", MaxSizeMB: 100, MaxFiles: 10, ClientIP: "full"},
		Timeouts: Timeouts{
			Handshake:    Duration(10 * time.Second),
			ReadHeader:   Duration(10 * time.Second),
			Idle:         Duration(120 * time.Second),
			UpstreamDial: Duration(5 * time.Second),
			Drain:        Duration(30 * time.Second),
			FailPause:    Duration(10 * time.Second),

			UpstreamHeader: Duration(60 * time.Second), // nginx's proxy_read_timeout
			UpstreamRead:   Duration(60 * time.Second),
		},
		Limits: Limits{
			HeaderBytes:       64 << 10,
			H2Streams:         128,
			ConnsPerClient:    256,
			RequestsPerClient: 256,
			UpstreamConns:     DefaultUpstreamConns,
			UpstreamQueue:     Duration(10 * time.Second),
			UpstreamStreams:   1024,
			BodyTimeout:       Duration(20 * time.Second),
			BodyMinRate:       500,
			WriteTimeout:      Duration(30 * time.Second),
			Ranges:            100,
			SpillBytes:        64 << 20,
			SpillTotal:        1 << 30,
			AuthAttempts:      10,
			QUICHandshakes:    64,
			ParkAfter:         Duration(DefaultParkAfter),
			RefuseEarly:       true,
		},
	}
}

// DefaultUpstreamConns is limits.upstream_conns's default.
const DefaultUpstreamConns = 8

// DefaultParkAfter is limits.park_after's default: how long an idle
// HTTP/1.1 connection waits before it is parked (edge/internal/park says why
// 250 ms).
const DefaultParkAfter = 250 * time.Millisecond

// Error is a problem in a configuration file: where and why.
type Error struct {
	File string
	Line int    // 0 when unknown
	Key  string // dotted key path, e.g. sites[0].upstream
	Err  error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	msg := e.Err.Error()
	if e.Key != "" {
		b.WriteString(": ")
		b.WriteString(e.Key)
		// A leaf's error under the key of the same name says it once:
		// "policy: invalid policy", not "policy: policy: invalid policy".
		msg = strings.TrimPrefix(msg, e.Key+": ")
	}
	b.WriteString(": ")
	b.WriteString(msg)
	return b.String()
}

// Unwrap returns ErrInvalid and the reason.
func (e *Error) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// ErrInvalid is wrapped by every configuration error.
var ErrInvalid = errors.New("edge: bad configuration")

// DefaultFingerprintLog is the fingerprint log of a configuration file
// that does not name one (log.fingerprints absent); FingerprintsOff turns
// the log off.
const (
	DefaultFingerprintLog = "/var/log/edge/fp.jsonl"
	FingerprintsOff       = "off"
)

// Load reads and validates a configuration file, as `edge run` does.
// Unknown keys and bad values are refused with the file, line, key and
// reason, all at once. A file that does not name a fingerprint log gets
// DefaultFingerprintLog. The Config it returns is validated: New,
// NewHandler and Reload of package edge do not validate it again.
func Load(path string) (Config, error) {
	cfg, err := Read(path)
	if err == nil {
		err = cfg.Check()
	}
	if err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Read reads a configuration file with the defaults of `edge run`, as Load
// does, without validating it. It fails when the file cannot be read or is
// not YAML; the values it could not decode are reported by Check, with
// every problem Validate finds (Validate alone does not see them: call
// Check before using the Config). It lets `edge config check` go on to
// check more of a configuration that has problems.
func Read(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("edge: read config: %w", err)
	}
	cfg := Default()
	cfg.File = path
	cfg.decodeErr = decodeConfig(path, data, &cfg)
	if cfg.lines == nil { // not YAML: nothing was decoded
		return Config{}, cfg.decodeErr
	}
	if _, set := cfg.lines["log.fingerprints"]; !set {
		cfg.Log.Fingerprints = DefaultFingerprintLog
	}
	return cfg, nil
}

// Parse parses and validates configuration bytes; name is used in
// errors. Unlike Load it leaves the fingerprint log off unless the bytes
// name one. The Config it returns is validated, as Load's.
func Parse(name string, data []byte) (Config, error) {
	cfg := Default()
	cfg.File = name
	cfg.decodeErr = decodeConfig(name, data, &cfg)
	if err := cfg.Check(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// UnmarshalYAML reads a duration such as "10s" or "24h".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return nodeError(n, "a duration such as 10s or 24h, got %q", n.Value)
	}
	*d = Duration(v)
	return nil
}

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalYAML reads a CIDR or a single address.
func (p *Prefix) UnmarshalYAML(n *yaml.Node) error {
	s := strings.TrimSpace(n.Value)
	if pf, err := netip.ParsePrefix(s); err == nil {
		*p = Prefix(pf.Masked())
		return nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		*p = Prefix(netip.PrefixFrom(a, a.BitLen()))
		return nil
	}
	return nodeError(n, "a CIDR such as 10.0.0.0/8 or an address, got %q", n.Value)
}

// UnmarshalYAML reads one URL (http://, https:// or unix:/path.sock) or a
// list of them.
func (u *Upstreams) UnmarshalYAML(n *yaml.Node) error {
	var nodes []*yaml.Node
	switch n.Kind {
	case yaml.ScalarNode:
		nodes = []*yaml.Node{n}
	case yaml.SequenceNode:
		nodes = n.Content
	default:
		return nodeError(n, "an upstream URL or a list of them")
	}
	out := make(Upstreams, 0, len(nodes))
	for _, c := range nodes {
		v, err := ParseUpstream(c.Value)
		if err != nil {
			return nodeProblem(c, err)
		}
		out = append(out, v)
	}
	*u = out
	return nil
}

// ParseUpstream reads one upstream URL as the configuration file writes it:
// http://, https:// (a missing port is the scheme's) or unix:/path.sock,
// which becomes an http:// URL whose host names the socket (see
// UnixSocket).
func ParseUpstream(s string) (*url.URL, error) {
	if path, ok := strings.CutPrefix(s, "unix:"); ok {
		// unix:/run/gitea/gitea.sock: HTTP over a Unix socket. The URL gets
		// a made-up host that names the socket; the transport dials it.
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?#") {
			return nil, fmt.Errorf("upstream %q: want unix:/absolute/path/of/the.sock", s)
		}
		return &url.URL{Scheme: "http", Host: unixHost(path), Opaque: ""}, nil
	}
	if !strings.Contains(s, "://") {
		return nil, fmt.Errorf("upstream %q has no scheme: add http:// (or https://, or unix:/path.sock)", s)
	}
	v, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("bad upstream URL %q: %v", s, err)
	case v.Scheme != "http" && v.Scheme != "https":
		return nil, fmt.Errorf("upstream %q: want http://, https:// or unix:/path.sock", s)
	case v.Host == "":
		return nil, fmt.Errorf("upstream %q has no host", s)
	case v.RawQuery != "" || v.Fragment != "" || v.User != nil:
		return nil, fmt.Errorf("upstream %q: no query, fragment or user info allowed", s)
	}
	if _, _, err := net.SplitHostPort(v.Host); err != nil {
		port := "80"
		if v.Scheme == "https" {
			port = "443"
		}
		v.Host = net.JoinHostPort(strings.Trim(v.Host, "[]"), port)
	}
	return v, nil
}

// unixHost is the made-up host of a Unix-socket upstream: ".sock.invalid"
// (RFC 2606) so it is never resolved, the socket's path hex-encoded so the
// transport can read it back (UnixSocket).
func unixHost(path string) string { return hex.EncodeToString([]byte(path)) + unixSuffix }

const unixSuffix = ".sock.invalid:0"

// UpstreamName is how logs, metrics and messages name an upstream: its URL
// as configured, "unix:/run/app.sock" for a Unix socket (not the made-up
// host the transport reads).
func UpstreamName(u *url.URL) string {
	if path, ok := UnixSocket(u.Host); ok {
		return "unix:" + path
	}
	return u.String()
}

// AddrName is UpstreamName for a dial address (host:port):
// "unix:/run/app.sock" for a Unix socket, else addr.
func AddrName(addr string) string {
	if path, ok := UnixSocket(addr); ok {
		return "unix:" + path
	}
	return addr
}

// UnixSocket returns the socket path of a Unix-socket upstream's dial
// address (the host of a URL ParseUpstream made of unix:/path.sock), or
// false for any other address.
func UnixSocket(addr string) (string, bool) {
	h, ok := strings.CutSuffix(addr, unixSuffix)
	if !ok {
		return "", false
	}
	b, err := hex.DecodeString(h)
	return string(b), err == nil
}
