// Package testacme runs Pebble, the ACME test CA, inside a test process,
// with a DNS server that answers 127.0.0.1 for every name: ACME end to end
// on loopback, for the certs and edge tests. It never reaches a binary.
//
// Pebble reads PEBBLE_VA_NOSLEEP, PEBBLE_WFE_NONCEREJECT and
// PEBBLE_AUTHZREUSE when it starts; set them in TestMain with SetEnv.
package testacme

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"
)

// SetEnv sets what Pebble reads at start: no random validation delays, no
// rejected nonces, and every order validated afresh. Call it from TestMain,
// before any test runs.
func SetEnv() {
	os.Setenv("PEBBLE_VA_NOSLEEP", "1")
	os.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	os.Setenv("PEBBLE_AUTHZREUSE", "0")
}

// CA is an in-process Pebble.
type CA struct {
	DirURL    string         // the ACME directory
	RootsFile string         // PEM of the directory's TLS certificate (certs.Config.CARootsFile)
	Roots     *x509.CertPool // Pebble's issuing root, the only root clients trust
	Down      atomic.Bool    // when set, every connection to the CA is closed unanswered

	mu        sync.Mutex
	accounts  sync.Mutex     // one new-account request at a time (see Start)
	orders    map[string]int // new-order requests per identifier
	finalized map[string]int // finalize requests per name of the CSR
}

// Options tune the CA.
type Options struct {
	Validity uint64            // certificate lifetime in seconds; 0 = Pebble's default
	EABKeys  map[string]string // key id → base64url HMAC key; non-nil requires EAB
}

// Start starts Pebble validating http-01 on httpPort and tls-alpn-01 on
// tlsPort of the address its DNS server gives (127.0.0.1).
func Start(t testing.TB, httpPort, tlsPort int, opt Options) *CA {
	t.Helper()
	logger := log.New(io.Discard, "", 0)
	store := db.NewMemoryStore()
	issuer := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{
		"default": {Description: "test", ValidityPeriod: opt.Validity},
	})
	validator := va.New(logger, httpPort, tlsPort, false, StartDNS(t), store)
	for id, key := range opt.EABKeys {
		if err := store.AddExternalAccountKeyByID(id, key); err != nil {
			t.Fatal(err)
		}
	}
	front := wfe.New(logger, store, validator, issuer, []string{"pebble.letsencrypt.org"}, false, opt.EABKeys != nil, 0, 0)
	c := &CA{orders: map[string]int{}, finalized: map[string]int{}}
	h := front.Handler()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.Down.Load() {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		if r.Method == http.MethodPost && r.URL.Path == "/sign-me-up" {
			// Pebble's NewAccount writes an existing account it returns
			// while another request encodes it (wfe.go:1415 against
			// :1360, pebble v2.10.3): a data race the race detector fails
			// tests on when two clients of one key register at once.
			c.accounts.Lock()
			defer c.accounts.Unlock()
		}
		if r.Method == http.MethodPost && r.URL.Path == "/order-plz" {
			c.countOrder(r)
		}
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/finalize-order/") {
			c.countFinalize(r)
		}
		h.ServeHTTP(w, r)
	}))
	srv.Config.ErrorLog = logger
	srv.StartTLS()
	// Not srv.Close: it waits for every handler, and Pebble's memory store
	// can deadlock its own handlers (wfe's prepAuthorizationForDisplay
	// leaves a challenge read-locked when it skips it; a later Lock of that
	// challenge then waits forever, and the store's lock after it). A stuck
	// CA must fail the test that needs it, not hang the test binary.
	t.Cleanup(func() {
		srv.Listener.Close()
		srv.CloseClientConnections()
	})
	c.DirURL = srv.URL + wfe.DirectoryPath
	c.RootsFile = filepath.Join(t.TempDir(), "acme-server.pem")
	if err := os.WriteFile(c.RootsFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Roots = x509.NewCertPool()
	c.Roots.AddCert(issuer.GetRootCert(0).Cert)
	return c
}

// countOrder records the identifiers of a new-order request (a JWS whose
// payload lists them, RFC 8555, section 7.4).
func (c *CA) countOrder(r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var jws struct{ Payload string }
	var order struct{ Identifiers []struct{ Value string } }
	json.Unmarshal(body, &jws)
	payload, _ := base64.RawURLEncoding.DecodeString(jws.Payload)
	json.Unmarshal(payload, &order)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range order.Identifiers {
		c.orders[id.Value]++
	}
}

// countFinalize records the names of a finalize request's CSR (RFC 8555,
// section 7.4): an order whose authorizations all passed, for which the CA
// issues a certificate.
func (c *CA) countFinalize(r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var jws struct{ Payload string }
	var fin struct{ CSR string }
	json.Unmarshal(body, &jws)
	payload, _ := base64.RawURLEncoding.DecodeString(jws.Payload)
	json.Unmarshal(payload, &fin)
	der, _ := base64.RawURLEncoding.DecodeString(fin.CSR)
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range csr.DNSNames {
		c.finalized[name]++
	}
}

// FinalizedFor returns the finalize requests the CA received for name: the
// certificates it was asked to issue once every challenge passed.
func (c *CA) FinalizedFor(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.finalized[name]
}

// OrdersFor returns the new-order requests the CA received for name.
func (c *CA) OrdersFor(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.orders[name]
}

// StartDNS serves, over TCP as Pebble asks, 127.0.0.1 for every A query and
// no AAAA records; it returns its address.
func StartDNS(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		for _, q := range r.Question {
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{
					Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET},
					A:   net.IPv4(127, 0, 0, 1),
				})
			}
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}
