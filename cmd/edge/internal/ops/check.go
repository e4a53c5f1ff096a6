package ops

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/crypto/acme"

	"github.com/maatproxy/maat/certs"
	"github.com/maatproxy/maat/challenge"
	"github.com/maatproxy/maat/edge"
	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/geo"
	"github.com/maatproxy/maat/locales"
	"github.com/maatproxy/maat/policy"
	"github.com/maatproxy/maat/static"
	"github.com/maatproxy/maat/store"
)

// CheckConfig does with a configuration file what `edge run` does, short
// of listening and of writing anything: it reads and validates the file;
// compiles the policy with the configuration's geo databases and divert
// targets; opens the geo databases, the certificate files (tls.mode: files)
// and what tls.cache already holds (the local CA, ACME certificates);
// builds every site's static roots and the page templates; resolves the
// listen addresses; and checks, as the user running it, that the log files,
// the state directory and the secret can be written or their directories
// made where run would make them. Last it builds the Handler run would
// serve with, from a throwaway Env.
//
// It returns every problem at once, each a *ConfigError naming the file,
// line and key, and the warnings run would log (a policy's skipped rules,
// a secret that will not survive a restart).
//
// Unless o.Offline, it also asks what run would ask of the network, each
// within o.Timeout: the shared Redis (store.kind: redis) is pinged and the
// ACME directory (tls.mode: acme) fetched; what does not answer is a
// warning, since run starts without them. With o.Offline it touches no
// network at all (no DNS lookup, no Redis, no ACME CA), and the report's
// Skipped lists what it did not check.
func CheckConfig(ctx context.Context, path string, o CheckOptions) (CheckReport, error) {
	cfg, err := config.Read(path)
	if err != nil {
		return CheckReport{}, err
	}
	c := checker{cfg: &cfg, offline: o.Offline}
	c.add(cfg.Check())
	c.listen()
	c.policy()
	c.geo()
	c.certificates()
	c.state()
	c.logs()
	c.roots()
	c.templates()
	if len(c.errs) == 0 {
		c.add(edge.CheckHandler(cfg))
	}
	c.network(ctx, cmp.Or(o.Timeout, DefaultCheckTimeout))
	return CheckReport{Warnings: c.warnings, Skipped: c.skipped}, config.SortByLine(config.Problems(cfg.Locate(errors.Join(c.errs...))))
}

// DefaultCheckTimeout bounds each network check of CheckConfig.
const DefaultCheckTimeout = 5 * time.Second

// CheckOptions choose what CheckConfig may do beyond reading files.
type CheckOptions struct {
	// Offline touches no network: no DNS lookup, no Redis, no ACME
	// directory (edge config check -offline, for CI).
	Offline bool
	// Timeout bounds each network check; if zero, DefaultCheckTimeout.
	Timeout time.Duration
}

// CheckReport is what CheckConfig found besides problems.
type CheckReport struct {
	// Warnings are what run would log, and the network checks that failed.
	Warnings []string
	// Skipped lists, in words, what an offline check did not check.
	Skipped []string
}

// checker collects the problems of one configuration.
type checker struct {
	cfg      *config.Config
	offline  bool // touch no network (CheckOptions.Offline)
	errs     []error
	warnings []string
	skipped  []string // what the offline check left out
	bad      []string // keys already reported, so that a check does not report them twice
}

// add records the problems joined in err.
func (c *checker) add(err error) {
	for _, e := range config.Problems(err) {
		var ce *config.Error
		if errors.As(e, &ce) {
			c.bad = append(c.bad, ce.Key)
		}
		c.errs = append(c.errs, e)
	}
}

// fail records a problem of key. CheckConfig's Locate names the file and
// line.
func (c *checker) fail(key string, err error) {
	if err != nil {
		c.add(&config.Error{File: c.cfg.File, Key: key, Err: err})
	}
}

// reported tells whether key, or a key around or under it, has a problem.
func (c *checker) reported(key string) bool {
	return slices.ContainsFunc(c.bad, func(b string) bool { return config.KeysOverlap(b, key) })
}

// listen resolves the listen addresses' host names, as binding them would;
// offline, only addresses (a name would need a lookup).
func (c *checker) listen() {
	l := &c.cfg.Listen
	for _, a := range []struct{ key, addr string }{{"listen.https", l.HTTPS}, {"listen.http", l.HTTP}, {"listen.admin", l.Admin}} {
		if a.addr == "" || c.reported(a.key) {
			continue
		}
		if host, _, err := net.SplitHostPort(a.addr); c.offline && err == nil && host != "" {
			if _, err := netip.ParseAddr(host); err != nil {
				c.skip("%s: the host name %q is not looked up (DNS)", a.key, host)
				continue
			}
		}
		if _, err := net.ResolveTCPAddr("tcp", a.addr); err != nil {
			c.fail(a.key, err)
		}
	}
}

// policy compiles the global policy and each site's (sites[].policy).
func (c *checker) policy() {
	if !c.reported("policy") {
		p, err := edge.LoadPolicy(c.cfg)
		c.fail("policy", err)
		c.policyWarnings("policy", p)
	}
	seen := map[string]bool{}
	for key, file := range edge.PolicyFiles(c.cfg) {
		if c.reported(key) || seen[file] {
			continue
		}
		seen[file] = true
		p, err := edge.LoadPolicyFile(c.cfg, file)
		c.fail(key, err)
		c.policyWarnings(key, p)
	}
}

func (c *checker) policyWarnings(key string, p *policy.Policy) {
	if p == nil {
		return
	}
	for _, w := range p.Warnings() {
		c.warnings = append(c.warnings, key+": "+w)
	}
}

// skip records what an offline check left out.
func (c *checker) skip(format string, args ...any) {
	c.skipped = append(c.skipped, fmt.Sprintf(format, args...))
}

// network asks what run asks of the network at start, each within
// timeout, and warns of what does not answer; offline, it says what it
// skipped.
func (c *checker) network(ctx context.Context, timeout time.Duration) {
	if c.cfg.Store.Kind == "redis" && !c.reported("store") {
		if c.offline {
			c.skip("store.url: Redis at %s is not pinged", redisHost(c.cfg.Store.URL))
		} else if err := pingRedis(ctx, c.cfg.Store.URL, timeout); err != nil {
			c.warnings = append(c.warnings, fmt.Sprintf("store.url: Redis does not answer (run starts without it, serving from memory): %v", err))
		}
	}
	if c.cfg.TLS.Mode == certs.ModeACME && !c.reported("tls") {
		dir := cmp.Or(c.cfg.TLS.ACME.Directory, acme.LetsEncryptURL)
		if c.offline {
			c.skip("tls.acme.directory: the ACME directory %s is not fetched", dir)
		} else if err := fetchACMEDirectory(ctx, dir, c.cfg.TLS.ACME.CARoots, timeout); err != nil {
			c.warnings = append(c.warnings, fmt.Sprintf("tls.acme.directory: the ACME directory %s does not answer (run retries; no certificate is ordered until it does): %v", dir, err))
		}
	}
}

// redisHost is the host:port of a Redis URL, without its password.
func redisHost(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return "(the configured URL)"
	}
	return p.Host
}

func pingRedis(ctx context.Context, u string, timeout time.Duration) error {
	r, err := store.OpenRedis(u)
	if err != nil {
		return err
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return r.Ping(ctx)
}

// fetchACMEDirectory reads the ACME directory at dir, trusting the system
// roots and those of the PEM file roots (tls.acme.ca_roots), if any.
func fetchACMEDirectory(ctx context.Context, dir, roots string, timeout time.Duration) error {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if roots != "" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		b, err := os.ReadFile(roots)
		if err != nil {
			return err
		}
		pool.AppendCertsFromPEM(b)
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	defer t.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := (&acme.Client{DirectoryURL: dir, HTTPClient: &http.Client{Transport: t}}).Discover(ctx)
	return err
}

func (c *checker) geo() {
	g := c.cfg.Geo
	if g == (config.GeoConfig{}) || c.reported("geo") {
		return
	}
	_, err := geo.Open(geo.Config{ASNDB: g.ASNDB, CountryDB: g.CountryDB})
	c.fail("geo", err)
}

// certificates builds the certificate manager as New does, over a cache
// that reads tls.cache but writes nothing: the certificate files are
// read, and a local CA or ACME certificates already made are loaded.
func (c *checker) certificates() {
	if c.reported("tls") {
		return
	}
	cc := c.cfg.Certs()
	if cc.CacheDir != "" {
		cc.Cache = readOnlyCache{certs.DirCache(cc.CacheDir)}
		if err := checkDir(cc.CacheDir, true); err != nil {
			c.fail("tls.cache", err)
			return
		}
	}
	_, err := certs.New(cc)
	c.fail("tls", err)
}

// readOnlyCache reads a certificate cache and drops what is written to it.
type readOnlyCache struct{ certs.Cache }

func (readOnlyCache) Put(context.Context, string, []byte) error { return nil }
func (readOnlyCache) Delete(context.Context, string) error      { return nil }

// state checks the challenge secret: readable, or makeable where run makes
// it. Without challenge.secret_file a failure is a warning, as in run.
func (c *checker) state() {
	w, err := edge.CheckSecret(c.cfg, func(dir string) error { return checkDir(dir, true) })
	if w != "" {
		c.warnings = append(c.warnings, w)
	}
	c.add(err)
}

// logs checks that the fingerprint log and the access logs can be opened
// for writing: the file, or its directory (which run makes for the
// fingerprint log).
func (c *checker) logs() {
	if p := c.cfg.Log.Fingerprints; p != "" && !c.reported("log") {
		c.fail("log.fingerprints", checkFile(p, true))
	}
	for i, s := range c.cfg.Sites {
		key := fmt.Sprintf("sites[%d].access_log", i)
		if s.AccessLog != nil && !c.reported(key) {
			c.fail(key+".path", checkFile(s.AccessLog.Path, false))
		}
	}
}

// roots opens each static root as the Handler will.
func (c *checker) roots() {
	for key, sc := range edge.StaticRoots(c.cfg) {
		if !c.reported(key) {
			_, err := static.New(sc)
			c.fail(key, err)
		}
	}
}

// templates parses the page templates of challenge.template_dir.
func (c *checker) templates() {
	dir := c.cfg.Challenge.TemplateDir
	if dir == "" || c.reported("challenge.template_dir") {
		return
	}
	msgs, err := locales.New()
	if err != nil {
		c.fail("challenge", fmt.Errorf("edge: locales: %w", err))
		return
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	_, err = challenge.New(challenge.Config{Secret: secret, TemplateDir: dir, Messages: msgs})
	c.fail("challenge.template_dir", err)
}

// checkFile checks that the file at path can be opened for appending, as
// a log writer opens it, without creating it: the file is writable, or
// its directory is (and, when mkdir, a missing directory can be made).
func checkFile(path string, mkdir bool) error {
	if path == "-" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		return f.Close()
	}
	if !missing(err) {
		return err
	}
	return checkDir(filepath.Dir(path), mkdir)
}

// checkDir checks that a file can be made in dir, or, when mkdir, that dir
// can be made if it is missing; it leaves nothing behind.
func checkDir(dir string, mkdir bool) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case err == nil:
		return probeDir(dir)
	case !missing(err):
		return err
	case !mkdir:
		return fmt.Errorf("directory %s does not exist", dir)
	}
	parent := dir
	for {
		next := filepath.Dir(parent)
		if next == parent {
			return fmt.Errorf("directory %s does not exist", dir)
		}
		parent = next
		if fi, err := os.Stat(parent); err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("directory %s cannot be made: %s is not a directory", dir, parent)
			}
			if err := probeDir(parent); err != nil {
				return fmt.Errorf("directory %s does not exist and cannot be made: %w", dir, err)
			}
			return nil
		}
	}
}

// missing reports whether err says a path does not exist, or that one of
// its parents is a file.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// probeDir makes and removes a file in dir.
func probeDir(dir string) error {
	f, err := os.CreateTemp(dir, ".edge-check-*")
	if err != nil {
		return fmt.Errorf("directory %s is not writable by user %d (check as the user the edge runs as)", dir, os.Getuid())
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
