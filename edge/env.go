package edge

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maatproxy/maat/challenge"
	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/edge/internal/basicauth"
	"github.com/maatproxy/maat/edge/internal/console"
	"github.com/maatproxy/maat/edge/internal/secret"
	"github.com/maatproxy/maat/edge/internal/spill"
	"github.com/maatproxy/maat/fplog"
	"github.com/maatproxy/maat/geo"
	"github.com/maatproxy/maat/policy"
	"github.com/maatproxy/maat/store"
)

// Store is what a Handler needs of shared state: single-use marks for
// challenge tokens and token buckets for RATE rules. store.Memory and
// store.Redis implement it.
type Store interface {
	challenge.Marker
	Take(ctx context.Context, key string, rate float64, burst int) (ok bool, retryAfter time.Duration, err error)
}

// Env is what a Handler is given rather than builds from its configuration:
// the parts that outlive one configuration snapshot and are shared by the
// Handlers a Server swaps in. Every field may be left zero; NewHandler then
// uses a private default (a Handler built from the zero Env stands alone,
// as tests want it).
type Env struct {
	// Log receives the edge's own messages. If nil, they are discarded.
	Log *slog.Logger
	// Store holds single-use marks and rate counters. If nil, an in-memory
	// store that only this Handler uses.
	Store Store
	// Secret keys challenge tokens, pass cookies and log hashes. If nil, a
	// random one: passes do not survive the Handler.
	Secret []byte
	// Messages localizes the pages. If nil, the locales package's catalog.
	Messages challenge.Messages
	// FPLog receives one fingerprint log line per request. If nil, none.
	FPLog *fplog.Writer
	// Geo answers the ASN and country of a client address (geo.asn_db,
	// geo.country_db). If nil, none: geo rules never match.
	Geo *geo.DB
	// HTTPSPort is the port of the edge's https listener, for the https URLs
	// the edge redirects to. If empty, 443 (no port in URLs).
	HTTPSPort string

	// Set by the Server; private defaults otherwise.
	verifier *policy.Verifier
	metrics  *metrics
	ids      *requestIDs
	access   *accessLogs
	inflight *clientCounter    // requests in flight per client (limits.requests_per_client)
	bcrypt   basicauth.Slots   // bcrypt comparisons running at once
	spill    *spill.Budget     // bytes of responses buffered for slow clients
	console  *console.Recorder // what the admin listener's page shows; nil: nothing recorded
	hooks    testHooks         // what tests turn (testhooks.go); zero in production
}

// resolve fills the zero fields of a copy of e with private defaults, and
// returns what it opened for the Handler alone, for Handler.Close.
func (e Env) resolve() (Env, []func(), error) {
	var own []func()
	if e.Log == nil {
		e.Log = slog.New(slog.DiscardHandler)
	}
	if e.Store == nil {
		m := store.NewMemory()
		e.Store = m
		own = append(own, func() { _ = m.Close() })
	}
	if e.Secret == nil {
		e.Secret = randomBytes(32)
	}
	if e.Messages == nil {
		m, err := newMessages()
		if err != nil {
			return e, own, err
		}
		e.Messages = m
	}
	if e.verifier == nil {
		v, err := policy.NewVerifier(policy.VerifierConfig{})
		if err != nil {
			return e, own, fmt.Errorf("edge: crawler verifier: %w", err)
		}
		e.verifier = v
	}
	if e.metrics == nil {
		e.metrics = newMetrics(nil)
	}
	if e.ids == nil {
		e.ids = newRequestIDs()
	}
	if e.access == nil {
		e.access = &accessLogs{secret: e.Secret}
		own = append(own, e.access.close)
	}
	return e, own, nil
}

// requestIDs makes request IDs: a random prefix per process, so that IDs
// differ between nodes and restarts, and a counter; cheap and unique.
type requestIDs struct {
	prefix string
	seq    atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &requestIDs{prefix: strconv.FormatUint(uint64(binary.BigEndian.Uint32(b[:])), 36) + "-"}
}

func (ids *requestIDs) next() string {
	var b [24]byte
	n := copy(b[:], ids.prefix)
	return string(strconv.AppendUint(b[:n], ids.seq.Add(1), 36))
}

// accessLogs opens each access log file once: sites that share a file share
// its writer, and a reload keeps it. The Server closes them at shutdown.
type accessLogs struct {
	secret []byte // keys the hashed client addresses (log.client_ip: hash)
	mu     sync.Mutex
	byPath map[string]*fplog.AccessWriter
}

// open returns the writer of an access log file, opening it on first use.
func (a *accessLogs) open(cfg *config.Config, al *config.AccessLog) (*fplog.AccessWriter, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w, ok := a.byPath[al.Path]; ok {
		return w, nil
	}
	w, err := fplog.NewAccessWriter(fplog.AccessConfig{
		Path: al.Path, Format: al.Format, MaxSizeMB: cfg.Log.MaxSizeMB, MaxFiles: cfg.Log.MaxFiles,
		ClientIP: cfg.Log.ClientIP, HashKey: secret.Derive(a.secret, "maat fplog client_ip"),
	})
	if err != nil {
		return nil, fmt.Errorf("edge: access log: %w", err)
	}
	if a.byPath == nil {
		a.byPath = map[string]*fplog.AccessWriter{}
	}
	a.byPath[al.Path] = w
	return w, nil
}

// reopen reopens every file (after an external rotation).
func (a *accessLogs) reopen(log *slog.Logger) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for path, w := range a.byPath {
		if err := w.Reopen(); err != nil {
			log.LogAttrs(context.Background(), slog.LevelError, "access_log_reopen_failed", slog.String("path", path), slog.String("error", err.Error()))
		}
	}
}

// close flushes and closes every file.
func (a *accessLogs) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, w := range a.byPath {
		_ = w.Close()
	}
	a.byPath = nil
}
