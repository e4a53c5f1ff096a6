package ops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/maatproxy/maat/certs"
	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/policy"
)

// CheckPolicy validates a policy file, ours or Anubis's, and returns its
// warnings and a sentence that says whether Maat's own signals add weight
// under it (policy.Policy.MaatSignals). Errors name file:line. strict
// makes unknown keys errors (policy.Options.Strict).
func CheckPolicy(path string, strict bool) (warnings []string, signals string, err error) {
	p, err := policy.Load(path, policy.Options{Strict: strict})
	if err != nil {
		return nil, "", err
	}
	_, signals = p.MaatSignals()
	return p.Warnings(), signals, nil
}

// RobotsOptions tune RobotsToPolicy.
type RobotsOptions = policy.RobotsOptions

// RobotsToPolicy converts robots.txt to policy YAML.
func RobotsToPolicy(r io.Reader, o RobotsOptions) ([]byte, error) {
	return policy.RobotsToPolicyWith(r, o)
}

// FPTopOptions are the flags of `edge fp top`.
type FPTopOptions struct {
	By    string // a name of FPTopFields; "" = ja4
	Since string // e.g. 90m, 12h, 1d, 2w (fplog.ParseSince); "" = all
	Site  string // a host: only its records; "" = all
	// Action is one of FPTopActions: only records of it; "" = all.
	Action string
	Limit  int
	JSON   bool
	Stdin  io.Reader // read for the file "-"; nil = os.Stdin
}

// FPTopFields lists what `edge fp top -by` counts.
func FPTopFields() []string { return fplog.ByFields() }

// FPTopActions lists what `edge fp top -action` takes.
func FPTopActions() []string {
	return []string{fplog.ActionAllow, fplog.ActionChallenge, fplog.ActionDeny, fplog.ActionRate, fplog.ActionDivert, fplog.ActionPass}
}

// Validate reports a -by field, a -since duration or an -action FPTop
// would refuse.
func (o *FPTopOptions) Validate() error {
	var errs []error
	if o.Action != "" && !slices.ContainsFunc(FPTopActions(), func(a string) bool { return strings.EqualFold(a, o.Action) }) {
		errs = append(errs, fmt.Errorf("-action %q: want one of %s", o.Action, strings.Join(FPTopActions(), ", ")))
	}
	if strings.ContainsAny(o.Site, "/ ") {
		errs = append(errs, fmt.Errorf("-site %q: want a host name, as in sites[].hosts (no scheme or path)", o.Site))
	}
	if o.By != "" && !slices.Contains(fplog.ByFields(), o.By) {
		errs = append(errs, fmt.Errorf("-by %q: want one of %s", o.By, strings.Join(fplog.ByFields(), ", ")))
	}
	if o.Since != "" {
		if _, err := fplog.ParseSince(o.Since); err != nil {
			errs = append(errs, fmt.Errorf("-since: %w", err))
		}
	}
	return errors.Join(errs...)
}

// FPTop summarizes fingerprint log files (plain or gzip; "-" = Stdin)
// into w.
func FPTop(w io.Writer, files []string, o FPTopOptions) error {
	opts := fplog.TopOptions{By: o.By, Limit: o.Limit, Stdin: o.Stdin, Host: o.Site, Action: o.Action}
	if o.Since != "" {
		d, err := fplog.ParseSince(o.Since)
		if err != nil {
			return fmt.Errorf("edge: -since: %w", err)
		}
		if d > 0 {
			opts.Since = time.Now().Add(-d)
		}
	}
	rows, err := fplog.Top(files, opts)
	if err != nil {
		return err
	}
	if o.JSON {
		return fplog.WriteTopJSON(w, rows)
	}
	return fplog.WriteTopTable(w, rows)
}

// HashPassword returns the bcrypt hash of a password, for
// basic_auth.users. Passwords longer than 72 bytes are refused: bcrypt
// would ignore the rest.
func HashPassword(password []byte) (string, error) {
	switch {
	case len(password) == 0:
		return "", errors.New("edge: empty password")
	case len(password) > 72:
		return "", errors.New("edge: password longer than 72 bytes, which bcrypt ignores beyond")
	}
	h, err := bcrypt.GenerateFromPassword(password, bcrypt.DefaultCost)
	if err != nil {
		return "", fmt.Errorf("edge: bcrypt: %w", err)
	}
	return string(h), nil
}

// LocalCA returns the certificate, in PEM, of the local CA that
// tls.mode: self-signed signs with, as the edge keeps it in tls.cache. It
// makes none: before the edge's first start there is none to trust.
func LocalCA(cfg *config.Config) ([]byte, error) {
	cc := cfg.Certs()
	switch {
	case cc.Mode != certs.ModeSelfSigned:
		return nil, cfg.Locate(&config.Error{File: cfg.File, Key: "tls.mode", Err: fmt.Errorf("is %q: only self-signed has a local CA to trust", cc.Mode)})
	case cc.CacheDir == "":
		return nil, cfg.Locate(&config.Error{File: cfg.File, Key: "tls.cache", Err: errors.New("is empty: the local CA lives in the running edge's memory only; set tls.cache to keep it")})
	}
	cache := &recordingCache{Cache: certs.DirCache(cc.CacheDir)}
	cc.Cache = cache
	m, err := certs.New(cc)
	if err != nil {
		return nil, fmt.Errorf("edge: %w", err)
	}
	if cache.wrote {
		return nil, fmt.Errorf("edge: no local CA in %s yet: start the edge once (edge run), then ask again", cc.CacheDir)
	}
	return m.RootPEM(), nil
}

// recordingCache reads a cache, drops writes and notes that one was tried.
type recordingCache struct {
	certs.Cache
	wrote bool
}

func (c *recordingCache) Put(context.Context, string, []byte) error {
	c.wrote = true
	return nil
}

func (*recordingCache) Delete(context.Context, string) error { return nil }

// CAFileName is the file InstallCA writes into the system's store.
const CAFileName = "maat-local-ca.crt"

// InstallCA adds a CA certificate (PEM) to the system's trust store, where
// it knows how: Debian and its derivatives (update-ca-certificates),
// Fedora, RHEL and their kin (update-ca-trust). It needs root unless root
// is set: then it installs into the tree under root (an image being built,
// a test), running update-ca-certificates on that tree. It returns what it
// did, in words.
func InstallCA(ctx context.Context, pem []byte, root string) (string, error) {
	if err := CanInstallCA(root); err != nil {
		return "", err
	}
	if _, err := exec.LookPath("update-ca-certificates"); err == nil {
		dir := filepath.Join(root, "/usr/local/share/ca-certificates")
		file := filepath.Join(dir, CAFileName)
		if err := writeCA(dir, file, pem); err != nil {
			return "", err
		}
		args := []string{}
		if root != "" {
			etc := filepath.Join(root, "/etc/ssl/certs")
			if err := os.MkdirAll(etc, 0o755); err != nil {
				return "", fmt.Errorf("edge: %w", err)
			}
			args = append(args, "--certsconf", filepath.Join(root, "/etc/ca-certificates.conf"),
				"--localcertsdir", dir, "--etccertsdir", etc, "--hooksdir", filepath.Join(root, "/etc/ca-certificates/update.d"))
		}
		if out, err := exec.CommandContext(ctx, "update-ca-certificates", args...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("edge: update-ca-certificates: %w: %s", err, strings.TrimSpace(string(out)))
		}
		if root != "" {
			return fmt.Sprintf("wrote %s and ran update-ca-certificates on the tree under %s", file, root), nil
		}
		return fmt.Sprintf("wrote %s and ran update-ca-certificates: programs that use the system's store trust the edge's certificates now (Firefox and Chrome keep their own: import the file there)", file), nil
	}
	if _, err := exec.LookPath("update-ca-trust"); err == nil && root == "" {
		dir := "/etc/pki/ca-trust/source/anchors"
		file := filepath.Join(dir, CAFileName)
		if err := writeCA(dir, file, pem); err != nil {
			return "", err
		}
		if out, err := exec.CommandContext(ctx, "update-ca-trust", "extract").CombinedOutput(); err != nil {
			return "", fmt.Errorf("edge: update-ca-trust: %w: %s", err, strings.TrimSpace(string(out)))
		}
		return fmt.Sprintf("wrote %s and ran update-ca-trust extract", file), nil
	}
	return "", errors.New("edge: this system has neither update-ca-certificates nor update-ca-trust: save edge trust's output and add it to the trust store by hand")
}

// CanInstallCA says why InstallCA would be refused before it reads
// anything: the system's store needs root.
func CanInstallCA(root string) error {
	if root == "" && os.Geteuid() != 0 {
		return errors.New("edge: installing a CA into the system's store needs root: run sudo edge trust -install, or save the output of edge trust and add it to your browser or store by hand")
	}
	return nil
}

func writeCA(dir, file string, pem []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("edge: %w", err)
	}
	if err := os.WriteFile(file, pem, 0o644); err != nil {
		return fmt.Errorf("edge: %w", err)
	}
	return nil
}
