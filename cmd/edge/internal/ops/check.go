package ops

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/maatproxy/maat/certs"
	"github.com/maatproxy/maat/challenge"
	"github.com/maatproxy/maat/edge"
	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/geo"
	"github.com/maatproxy/maat/locales"
	"github.com/maatproxy/maat/static"
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
func CheckConfig(path string) (warnings []string, err error) {
	cfg, err := config.Read(path)
	if err != nil {
		return nil, err
	}
	c := checker{cfg: &cfg}
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
	return c.warnings, config.SortByLine(config.Problems(cfg.Locate(errors.Join(c.errs...))))
}

// checker collects the problems of one configuration.
type checker struct {
	cfg      *config.Config
	errs     []error
	warnings []string
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

// listen resolves the listen addresses' host names, as binding them would.
func (c *checker) listen() {
	l := &c.cfg.Listen
	for _, a := range []struct{ key, addr string }{{"listen.https", l.HTTPS}, {"listen.http", l.HTTP}, {"listen.admin", l.Admin}} {
		if a.addr == "" || c.reported(a.key) {
			continue
		}
		if _, err := net.ResolveTCPAddr("tcp", a.addr); err != nil {
			c.fail(a.key, err)
		}
	}
}

func (c *checker) policy() {
	if c.reported("policy") {
		return
	}
	p, err := edge.LoadPolicy(c.cfg)
	if err != nil {
		c.fail("policy", err)
		return
	}
	for _, w := range p.Warnings() {
		c.warnings = append(c.warnings, "policy: "+w)
	}
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
