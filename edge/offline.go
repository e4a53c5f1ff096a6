package edge

import (
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/edge/internal/secret"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/policy"
	"github.com/maatproxy/maat/static"
)

// What the offline tools of the command line (cmd/edge/internal/ops:
// `edge config check`, `edge policy explain`, `edge trust`) need of edge:
// the steps New takes with a configuration, each on its own, so that a
// tool can take them without listening or writing and say what run would
// meet. The serving path does not call these; edge never imports ops.

// LoadPolicy compiles the policy of cfg (policy:, or the built-in default)
// as NewHandler does: knowing which geo databases and divert targets cfg
// has.
func LoadPolicy(cfg *config.Config) (*policy.Policy, error) { return loadPolicy(cfg) }

// LoadPolicyForHost compiles the policy that decides the requests for the
// Host host under cfg, as NewHandler does: the policy of the site that
// answers host (sites[].policy), or the global one when that site has
// none or no site answers host. key is the configuration key the policy
// comes from ("policy" or "sites[i].policy"), for its errors.
func LoadPolicyForHost(cfg *config.Config, host string) (p *policy.Policy, key string, err error) {
	byHost, wildcard := map[string]int{}, map[string]int{}
	for i, s := range cfg.Sites {
		for _, h := range s.Hosts {
			if n, wild := hostKey(h); wild {
				wildcard[n] = i
			} else {
				byHost[n] = i
			}
		}
	}
	if i, ok := lookupHost(byHost, wildcard, host); ok && cfg.Sites[i].Policy != "" {
		key = fmt.Sprintf("sites[%d].policy", i)
		p, err = loadPolicyFile(cfg, cfg.Sites[i].Policy)
		return p, key, err
	}
	p, err = loadPolicy(cfg)
	return p, "policy", err
}

// PolicyFiles yields the policy files of cfg's sites (sites[].policy), by
// their key, for a check to compile each.
func PolicyFiles(cfg *config.Config) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for i, s := range cfg.Sites {
			if s.Policy != "" && !yield(fmt.Sprintf("sites[%d].policy", i), s.Policy) {
				return
			}
		}
	}
}

// LoadPolicyFile compiles a policy file of cfg (a site's) as NewHandler
// does.
func LoadPolicyFile(cfg *config.Config, file string) (*policy.Policy, error) {
	return loadPolicyFile(cfg, file)
}

// StaticRoots yields each static root of cfg, by its key (sites[i].root,
// then sites[i].routes[j].root), with the static.Config NewHandler opens
// it with.
func StaticRoots(cfg *config.Config) iter.Seq2[string, static.Config] {
	return func(yield func(string, static.Config) bool) {
		for i, s := range cfg.Sites {
			key := fmt.Sprintf("sites[%d]", i)
			if s.Root != "" && !yield(key+".root", s.Static(cfg.Limits.Ranges)) {
				return
			}
			for j, r := range s.Routes {
				if r.Root != "" && !yield(fmt.Sprintf("%s.routes[%d].root", key, j), r.Static(cfg.Limits.Ranges)) {
					return
				}
			}
		}
	}
}

// CheckSecret checks the challenge secret file of cfg as New reads it,
// making nothing: a file there must be long enough; a missing one must be
// makeable, which canMake says of its directory (as New would make it,
// with its parents). A problem New refuses to start with (a secret too
// short; any problem with challenge.secret_file) is err, a *ConfigError;
// one it works around with a random secret per process is the warning it
// would log, in words.
func CheckSecret(cfg *config.Config, canMake func(dir string) error) (warning string, err error) {
	path, explicit := secretPath(cfg)
	if path == "" {
		return "neither challenge.secret_file nor tls.cache is set: the challenge secret will be random per process, and pass cookies and hashed client addresses will not survive a restart", nil
	}
	err = secret.Check(path, canMake)
	var short *secret.ShortError
	switch {
	case err == nil:
		return "", nil
	case explicit || errors.As(err, &short):
		return "", &config.Error{File: cfg.File, Key: secretKey(explicit), Err: err}
	}
	return fmt.Sprintf("tls.cache: %v: the challenge secret will be random per process, and pass cookies and hashed client addresses will not survive a restart", err), nil
}

// CheckHandler builds the Handler New would serve cfg with, and closes
// it, from an Env that opens no files (access logs are written nowhere,
// the secret is random, the store in memory): it returns what NewHandler
// refuses in cfg.
func CheckHandler(cfg config.Config) error {
	access := &accessLogs{secret: randomBytes(32), byPath: map[string]*fplog.AccessWriter{}}
	defer access.close()
	for _, s := range cfg.Sites {
		if s.AccessLog == nil {
			continue
		}
		w, err := fplog.NewAccessWriter(fplog.AccessConfig{Output: io.Discard, Format: s.AccessLog.Format,
			ClientIP: cfg.Log.ClientIP, HashKey: make([]byte, 32)}) // a stand-in: nothing is written
		if err != nil {
			return &config.Error{File: cfg.File, Key: "log", Err: err}
		}
		access.byPath[s.AccessLog.Path] = w
	}
	h, err := NewHandler(cfg, Env{access: access})
	if err != nil {
		return err
	}
	h.Close()
	return nil
}
