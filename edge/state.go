package edge

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/maatproxy/maat/edge/config"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"github.com/maatproxy/maat/challenge"
	"github.com/maatproxy/maat/edge/internal/secret"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/locales"
	"github.com/maatproxy/maat/policy"
	"github.com/maatproxy/maat/store"
)

// storeCloser is a Store the Server opened and closes.
type storeCloser interface {
	Store
	Close() error
}

// openStore opens the configured store. Redis is wrapped in a
// store.Resilient: when Redis cannot be reached the node goes on from
// memory, says so once in the log and in /readyz, and writes what it marked
// meanwhile back when Redis returns. It needs no Redis to start.
// A timeout other than zero replaces store.DefaultTimeout (tests).
func openStore(cfg config.StoreConfig, timeout time.Duration, log *slog.Logger) (storeCloser, *store.Resilient, error) {
	if cfg.Kind != "redis" {
		return store.NewMemory(), nil, nil
	}
	store.LogRedisTo(log) // not go-redis's own stderr logger
	r, err := store.OpenRedis(cfg.URL)
	if err != nil {
		return nil, nil, &config.Error{Key: "store.url", Err: err}
	}
	res, err := store.NewResilient(r, store.NewMemory(), store.ResilientConfig{
		Timeout: timeout,
		OnStateChange: func(degraded bool, err error) {
			if degraded {
				log.LogAttrs(context.Background(), slog.LevelError, "store_degraded",
					slog.String("store", "redis"), slog.String("error", errString(err)),
					slog.String("effect", "serving from this node's memory: marks, counters and certificates not shared until Redis returns"))
				return
			}
			log.LogAttrs(context.Background(), slog.LevelInfo, "store_recovered", slog.String("store", "redis"))
		},
	})
	if err != nil {
		_ = r.Close()
		return nil, nil, fmt.Errorf("edge: store: %w", err)
	}
	return res, res, nil
}

// certStoreTimeout bounds each call of the certificates' store to Redis.
const certStoreTimeout = 5 * time.Second

// openCertStore opens the certificates' own Resilient store over Redis,
// with a timeout for background work instead of the requests' 50 ms. Over
// the requests' store, one call that waited past 50 ms for a CPU (a loaded
// machine, a throttled container) turned it degraded for an instant, and in
// that instant a waiting node took the ACME lock in its own memory, or read
// a certificate another node had stored as missing, and ordered the name a
// second time. Certificates give Redis seconds a call instead; a Redis
// that is really gone still leaves each node ordering on its own, and what
// it stored meanwhile is written back on recovery.
func openCertStore(cfg config.StoreConfig) (*store.Resilient, error) {
	r, err := store.OpenRedis(cfg.URL)
	if err != nil {
		return nil, &config.Error{Key: "store.url", Err: err}
	}
	res, err := store.NewResilient(r, store.NewMemory(), store.ResilientConfig{Timeout: certStoreTimeout})
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("edge: certificate store: %w", err)
	}
	return res, nil
}

// sealPurpose is what the key sealing the certificates' values in Redis is
// derived for from the shared secret.
const sealPurpose = "store-seal v1"

// sealCertStore seals every value the certificates keep in the shared store
// (certificates and their keys, the ACME account key, the local CA, session
// ticket keys, challenge answers) with a key derived from the nodes' shared
// secret, so that Redis holds none of them in the clear. A value that does
// not open is logged and, through certMissing, treated as missing: the node
// serves its local copy or orders the name again, makes new ticket keys, or
// a new account. Values written before sealing (PEM: certificates, keys,
// the local CA) are read once and written back sealed (writtenBeforeSealing).
func sealCertStore(st store.Store, sec []byte, log *slog.Logger) (*store.Sealed, error) {
	s, err := store.NewSealed(st, store.SealConfig{
		Key:   secret.Derive(sec, sealPurpose),
		Plain: writtenBeforeSealing,
		OnError: func(key string, err error) {
			log.LogAttrs(context.Background(), slog.LevelError, "store_value_refused", slog.String("key", key),
				slog.String("error", err.Error()),
				slog.String("effect", "treated as missing: this node uses its own copy, or makes the value anew (a certificate is ordered again, session ticket keys are new)"))
		},
		OnResealed: func(key string) {
			log.LogAttrs(context.Background(), slog.LevelWarn, "store_value_resealed", slog.String("key", key),
				slog.String("effect", "a value stored in the clear by an older version was read once and written back sealed"))
		},
	})
	if err != nil {
		return nil, fmt.Errorf("edge: certificate store: %w", err)
	}
	return s, nil
}

// writtenBeforeSealing reports whether a value found in the clear may be
// read once and sealed: PEM, as versions before sealing wrote certificates,
// their keys, the ACME account key and the local CA. A PEM planted by
// whoever can write to Redis gains them nothing the store did not already
// give them (a certificate that is not the CA's for the name is not
// trusted; an account or a CA of theirs only stops renewals). Anything else
// is refused: above all session ticket keys (JSON), which, planted, would
// open every resumed session; refused, they are made anew.
func writtenBeforeSealing(_ string, data []byte) bool {
	return bytes.HasPrefix(data, []byte("-----BEGIN "))
}

// certMissing reports whether an error of the certificates' store means
// that the key holds nothing usable: not found, or a value that does not
// open (sealCertStore logged it).
func certMissing(err error) bool {
	return errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrOpen) || errors.Is(err, store.ErrNotSealed)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// SecretFileName is the challenge secret's file in the state directory
// (tls.cache) when challenge.secret_file is not set.
const SecretFileName = "secret"

// secretPath is where the challenge secret lives: challenge.secret_file,
// or SecretFileName in the state directory (tls.cache); "" when neither is
// set. explicit reports the first.
func secretPath(cfg *config.Config) (path string, explicit bool) {
	if cfg.Challenge.SecretFile != "" {
		return cfg.Challenge.SecretFile, true
	}
	if cfg.TLS.Cache != "" {
		return filepath.Join(cfg.TLS.Cache, SecretFileName), false
	}
	return "", false
}

// loadSecret reads the challenge secret, generating it on first start, so
// that pass cookies and hashed client addresses survive a restart. Without
// challenge.secret_file it lives in the state directory; when that is not
// set or not writable the secret is random for this process, and the log
// says what that costs. A secret_file that cannot be read or made, or a
// secret too short, is an error.
func loadSecret(cfg *config.Config, log *slog.Logger) ([]byte, error) {
	path, explicit := secretPath(cfg)
	if path == "" && cfg.Demo {
		return randomBytes(32), nil // the demo keeps nothing, and says so in its own words
	}
	if path == "" {
		log.LogAttrs(context.Background(), slog.LevelWarn, "secret_per_process",
			slog.String("reason", "neither challenge.secret_file nor tls.cache is set"),
			slog.String("effect", perProcessEffect(cfg, "pass cookies and hashed client addresses change at every restart")))
		return randomBytes(32), nil
	}
	b, err := secret.ReadOrMake(path)
	var short *secret.ShortError
	switch {
	case err == nil:
		if !explicit && cfg.Store.Kind == "redis" {
			log.LogAttrs(context.Background(), slog.LevelWarn, "secret_per_node", slog.String("path", path),
				slog.String("effect", "nodes that share the store but not the secret refuse each other's pass cookies: copy one secret file to every node and set challenge.secret_file"))
		}
		return b, nil
	case explicit || errors.As(err, &short):
		return nil, &config.Error{File: cfg.File, Key: secretKey(explicit), Err: err}
	}
	log.LogAttrs(context.Background(), slog.LevelWarn, "secret_per_process", slog.String("path", path),
		slog.String("error", err.Error()),
		slog.String("effect", perProcessEffect(cfg, "pass cookies and hashed client addresses change at every restart; make tls.cache writable or set challenge.secret_file")))
	return randomBytes(32), nil
}

// perProcessEffect is what a secret made for this process costs: effect,
// and with Redis the values sealed there (sealCertStore).
func perProcessEffect(cfg *config.Config, effect string) string {
	if cfg.Store.Kind == "redis" {
		effect += "; the certificates and keys sealed in Redis cannot be read by other nodes or after a restart"
	}
	return effect
}

func secretKey(explicit bool) string {
	if explicit {
		return "challenge.secret_file"
	}
	return "tls.cache"
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// loadPolicy reads the configured policy, or the built-in default.
func loadPolicy(cfg *config.Config) (*policy.Policy, error) { return loadPolicyFile(cfg, cfg.Policy) }

// loadPolicyFile reads the policy file (policy: or a site's), or the
// built-in default for "", knowing what cfg provides.
func loadPolicyFile(cfg *config.Config, file string) (*policy.Policy, error) {
	opts := policyOptions(cfg)
	if file == "" {
		return policy.LoadDefault(opts)
	}
	return policy.Load(file, opts)
}

// policyOptions tells the policy what the configuration provides: which
// geo databases exist and which divert targets.
func policyOptions(cfg *config.Config) policy.Options {
	o := policy.Options{Geo: policy.Geo{ASN: cfg.Geo.ASNDB != "", Country: cfg.Geo.CountryDB != ""}}
	for name := range cfg.Divert {
		o.DivertTargets = append(o.DivertTargets, name)
	}
	slices.Sort(o.DivertTargets)
	if o.DivertTargets == nil {
		o.DivertTargets = []string{} // none configured: every divert_to is unknown
	}
	return o
}

// newChallenger builds the challenger of policy p: it carries the policy
// version, so a changed policy re-challenges.
func (h *Handler) newChallenger(p *policy.Policy) (*challenge.Challenger, error) {
	cfg := &h.cfg
	bind, err := challenge.ParseBinding(cfg.Challenge.Bind)
	if err != nil {
		return nil, &config.Error{File: cfg.File, Key: "challenge.bind", Err: err}
	}
	m, rec := h.env.metrics, h.env.console
	challengeStatus, denyStatus := p.StatusCodes()
	c, err := challenge.New(challenge.Config{
		ChallengeStatus: challengeStatus,
		DenyStatus:      denyStatus,
		Secret:          h.env.Secret,
		PassTTL:         cfg.Challenge.PassTTL.D(),
		Marker:          h.env.Store,
		Bind:            bind,
		PolicyVersion:   p.Version(),
		Messages:        h.env.Messages,
		TemplateDir:     cfg.Challenge.TemplateDir,
		Contact:         cfg.Challenge.Contact,
		PolicyURL:       cfg.Challenge.PolicyURL,
		OnPass: func(_ *http.Request, sp challenge.Spec, solve time.Duration) {
			m.challenges.WithLabelValues("passed", sp.Algorithm).Inc()
			if rec != nil {
				rec.ChallengeResult(time.Now(), true)
			}
			m.solve.Observe(solve.Seconds())
		},
		OnFail: func(r *http.Request, reason string) {
			m.challenges.WithLabelValues("failed", reason).Inc()
			if rec != nil {
				rec.ChallengeResult(time.Now(), false)
			}
			if st := stateOf(r); st != nil {
				st.action = fplog.ActionDeny
				st.rules = append(st.rules, reason)
			}
		},
		RequestID: func(r *http.Request) string {
			if st := stateOf(r); st != nil {
				return st.id
			}
			return ""
		},
	})
	if err != nil {
		return nil, fmt.Errorf("edge: challenge: %w", err)
	}
	return c, nil
}

func newMessages() (challenge.Messages, error) {
	c, err := locales.New()
	if err != nil {
		return nil, fmt.Errorf("edge: locales: %w", err)
	}
	return c, nil
}
