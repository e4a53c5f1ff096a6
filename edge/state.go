package edge

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/maatproxy/maat/challenge"
	"github.com/maatproxy/maat/locales"
	"github.com/maatproxy/maat/policy"
	"github.com/maatproxy/maat/store"
)

// storeCloser is a Store the Server opened and closes.
type storeCloser interface {
	Store
	Close() error
}

func openStore(ctx context.Context, cfg StoreConfig, log *slog.Logger) (storeCloser, error) {
	if cfg.Kind == "redis" {
		store.LogRedisTo(log) // not go-redis's own stderr logger
		r, err := store.NewRedis(ctx, cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("edge: store: %w", err)
		}
		return r, nil
	}
	return store.NewMemory(), nil
}

// loadSecret reads the challenge secret, generating it on first start. An
// empty path means a random secret for this process only.
func loadSecret(path string) ([]byte, error) {
	if path == "" {
		return randomBytes(32), nil
	}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if len(b) < challenge.MinSecretLen {
			return nil, fmt.Errorf("edge: secret file %s holds %d bytes, want at least %d", path, len(b), challenge.MinSecretLen)
		}
		return b, nil
	case errors.Is(err, fs.ErrNotExist):
		b = randomBytes(32)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("edge: secret file: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			if errors.Is(err, fs.ErrExist) { // another node or process was first
				return loadSecret(path)
			}
			return nil, fmt.Errorf("edge: secret file: %w", err)
		}
		if _, err := f.Write(b); err != nil {
			f.Close()
			return nil, fmt.Errorf("edge: secret file: %w", err)
		}
		return b, f.Close()
	default:
		return nil, fmt.Errorf("edge: secret file: %w", err)
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// derive returns a key for one purpose from the shared secret.
func derive(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// loadPolicy reads the configured policy, or the built-in default.
func loadPolicy(path string) (*policy.Policy, error) {
	if path == "" {
		return policy.Default()
	}
	return policy.Load(path, policy.Options{})
}

// newChallenger builds the Handler's challenger: it carries the policy
// version, so a changed policy re-challenges.
func (h *Handler) newChallenger() (*challenge.Challenger, error) {
	cfg := &h.cfg
	bind, err := challenge.ParseBinding(cfg.Challenge.Bind)
	if err != nil {
		return nil, &ConfigError{File: cfg.path, Key: "challenge.bind", Err: err}
	}
	m := h.env.metrics
	c, err := challenge.New(challenge.Config{
		Secret:        h.env.Secret,
		PassTTL:       cfg.Challenge.PassTTL.D(),
		Marker:        h.env.Store,
		Bind:          bind,
		PolicyVersion: h.policy.Version(),
		Messages:      h.env.Messages,
		TemplateDir:   cfg.Challenge.TemplateDir,
		Contact:       cfg.Challenge.Contact,
		PolicyURL:     cfg.Challenge.PolicyURL,
		OnPass: func(_ *http.Request, sp challenge.Spec, solve time.Duration) {
			m.challenges.WithLabelValues("passed", sp.Algorithm).Inc()
			m.solve.Observe(solve.Seconds())
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
