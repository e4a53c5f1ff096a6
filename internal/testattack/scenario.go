package testattack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Target is an edge under attack: its listeners, a TLS configuration that
// trusts its certificate, the site's host name and the upstream behind it.
type Target struct {
	HTTPS string // host:port of the TCP listener (HTTP/1.1 and HTTP/2)
	HTTP3 string // host:port of the UDP listener; "" = no HTTP/3
	// TLS trusts the edge's certificate for Host; each connection sets its
	// own NextProtos on a clone.
	TLS      *tls.Config
	Host     string
	Upstream *Upstream
	// AuthPath is a path behind basic auth for user AuthUser, whose
	// password is AuthPassword (never "wrong…"); "" skips the password
	// flood, and AuthPassword "" the honest user's logins during it.
	AuthPath, AuthPassword string
	// OnHeld, if set, is called when an attack holds all it will hold and
	// is steady (the idle connections are all open), so that the caller
	// can measure what they cost.
	OnHeld func(held int)
}

// AuthUser is the user name the password flood tries.
const AuthUser = "alice"

// Params are the counts and times of the attacks.
type Params struct {
	ResetStreams int // rapid reset: streams opened and reset on one connection

	HeldConns, HeldStreams int // HTTP/2 connections × streams whose body never comes

	TrickleClients int           // HTTP/1.1 clients sending a body a byte at a time
	TrickleEvery   time.Duration // the time between two bytes

	SlowConns   int // HTTP/1.1 connections that never read a large response
	SlowStreams int // HTTP/2 streams behind a zero window

	IdleConns   int           // idle HTTP/2 connections, and as many HTTP/1.1 ones
	IdleSources int           // client addresses they come from
	IdleHold    time.Duration // how long they are held once all are open

	AuthClients int           // clients trying wrong passwords
	AuthEvery   time.Duration // each client's pace
	AuthFor     time.Duration // how long they try

	QUICClients int           // clients sending QUIC Initials and never reading
	QUICGiveUp  time.Duration // when a deaf client stops retransmitting

	HeaderRequests int // requests with an oversized header section, per protocol
	H2HeaderBytes  int // HPACK-encoded size of each HTTP/2 header list
	H1HeaderBytes  int // size of the one long HTTP/1.1 header field

	// Hold is the longest an attack that waits for the edge (to cut a
	// slow body, a slow reader, a missing body) lasts; what is still held
	// then is counted as held.
	Hold time.Duration
}

// Full are the counts and times of issue 15.
func Full() Params {
	return Params{
		ResetStreams: 20000,
		HeldConns:    4, HeldStreams: 250,
		TrickleClients: 20, TrickleEvery: 5 * time.Second,
		SlowConns: 100, SlowStreams: 500,
		IdleConns: 5000, IdleSources: 50, IdleHold: 2 * time.Second,
		AuthClients: 20, AuthEvery: 50 * time.Millisecond, AuthFor: 10 * time.Second,
		QUICClients: 2000, QUICGiveUp: 5 * time.Second,
		HeaderRequests: 20, H2HeaderBytes: 460 << 10, H1HeaderBytes: 100 << 10,
		Hold: 40 * time.Second,
	}
}

// Short are small counts, for tests against an edge with short timeouts.
func Short() Params {
	return Params{
		ResetStreams: 500,
		HeldConns:    2, HeldStreams: 50,
		TrickleClients: 4, TrickleEvery: 400 * time.Millisecond,
		SlowConns: 8, SlowStreams: 20,
		IdleConns: 60, IdleSources: 4, IdleHold: 200 * time.Millisecond,
		AuthClients: 4, AuthEvery: 20 * time.Millisecond, AuthFor: time.Second,
		QUICClients: 40, QUICGiveUp: time.Second,
		HeaderRequests: 3, H2HeaderBytes: 200 << 10, H1HeaderBytes: 100 << 10,
		Hold: 8 * time.Second,
	}
}

// Scenario is one attack.
type Scenario struct {
	Name  string // for selection: "rapid-reset"
	Title string // for a table row
	Run   func(ctx context.Context, t Target, p Params, out *Outcome) error
}

// Scenarios returns the attacks of issue 15, in its order, then issue 33's.
func Scenarios() []Scenario {
	return []Scenario{
		{"rapid-reset", "HTTP/2 rapid reset", rapidReset},
		{"held-headers", "HTTP/2 HEADERS, body never sent", heldHeaders},
		{"trickle", "HTTP/1.1 body, a byte at a time", trickle},
		{"slow-read", "slow readers, HTTP/1.1 and HTTP/2 zero window", slowRead},
		{"idle", "idle HTTP/2 connections", idle},
		{"idle-h1", "idle HTTP/1.1 connections", idleH1},
		{"auth-flood", "wrong basic-auth passwords", authFlood},
		{"quic-initials", "abandoned QUIC Initials", quicInitials},
		{"big-headers", "oversized header sections", bigHeaders},
		{"path-spellings", "other spellings of a path behind basic auth", pathSpellings},
	}
}

// Outcome is what an attack saw.
type Outcome struct {
	Answers Tally // what the attackers were answered, by kind
	mu      sync.Mutex
	notes   []string
	Held    int // connections or requests the attack held at its height
}

// Note adds a figure the attack measured itself.
func (o *Outcome) Note(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.notes = append(o.notes, fmt.Sprintf(format, args...))
}

// Notes returns the figures, in the order noted.
func (o *Outcome) Notes() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.notes)
}

// Tally counts answers by kind ("408", "reset REFUSED_STREAM", "held").
type Tally struct {
	mu sync.Mutex
	m  map[string]int
}

// Add counts n more of kind k.
func (t *Tally) Add(k string, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]int{}
	}
	t.m[k] += n
}

// Get returns the count of kind k.
func (t *Tally) Get(k string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[k]
}

// Total is the sum of all counts.
func (t *Tally) Total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, v := range t.m {
		n += v
	}
	return n
}

// String lists the kinds, most frequent first: "408 ×32, 429 ×256".
func (t *Tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.m))
	for k := range t.m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if t.m[a] != t.m[b] {
			return t.m[b] - t.m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, t.m[k])
	}
	return strings.Join(parts, ", ")
}

// Blocks of attacker addresses, one per scenario (127.block.x.y).
const (
	blockReset = 10 + iota
	blockHeld
	blockTrickle
	blockSlowH1
	blockSlowH2
	blockIdle
	blockAuth
	blockQUIC
	blockHeaders
	blockIdleH1
)

// source is the address of attacker k of a block: 127.block.(k/250).(k%250+1).
func source(block, k int) net.IP {
	return net.IPv4(127, byte(block), byte(k/250), byte(k%250+1))
}

// tlsConfig is the target's TLS configuration with one ALPN protocol.
func (t Target) tlsConfig(alpn string) *tls.Config {
	c := t.TLS.Clone()
	c.NextProtos = []string{alpn}
	if c.ServerName == "" {
		c.ServerName = t.Host
	}
	return c
}

// attackTLS is tlsConfig with the cheapest key exchange (X25519, no
// post-quantum share), as an attacker would choose.
func (t Target) attackTLS(alpn string) *tls.Config {
	c := t.tlsConfig(alpn)
	c.CurvePreferences = []tls.CurveID{tls.X25519}
	return c
}

// dialTLS opens a TLS connection to the edge from src, offering alpn only.
func (t Target) dialTLS(ctx context.Context, src net.IP, alpn string) (*tls.Conn, error) {
	d := &tls.Dialer{
		NetDialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 10 * time.Second},
		Config:    t.attackTLS(alpn),
	}
	c, err := d.DialContext(ctx, "tcp", t.HTTPS)
	if err != nil {
		return nil, err
	}
	tc := c.(*tls.Conn)
	if got := tc.ConnectionState().NegotiatedProtocol; got != alpn && !(alpn == "http/1.1" && got == "") {
		tc.Close()
		return nil, fmt.Errorf("testattack: the edge chose ALPN %q, not %q", got, alpn)
	}
	return tc, nil
}

// waitUntil polls cond every 50 ms until it holds, ctx ends or within has
// passed, and reports whether it held.
func waitUntil(ctx context.Context, within time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return cond()
		case <-tick.C:
		}
	}
	return true
}

// errKind names an error for a tally.
func errKind(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.Canceled):
		return "unfinished"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "connection closed"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "error"
}
