package edge

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/maatproxy/maat/certs"
	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/edge/internal/secret"
	"github.com/maatproxy/maat/internal/testredis"
	"github.com/maatproxy/maat/store"
)

// Redis keys of what the certificates keep there, as StorageCache names
// them ("certs:" + the cache key) in the store's blobs ("maat:blob:").
const (
	redisCAKey      = "maat:blob:certs:maat-local-ca-key.pem"
	redisCACert     = "maat:blob:certs:maat-local-ca.pem"
	redisTicketKeys = "maat:blob:certs:maat_session_ticket_keys"
)

// sealNode is an edge of TestStoreSealedInRedis.
type sealNode struct {
	*Server
	log *syncBuffer
}

// startSealNode starts a self-signed edge over the Redis at url, with its
// own state directory and the secret in secretFile.
func startSealNode(t *testing.T, name, url, secretFile string) *sealNode {
	t.Helper()
	cfg, err := config.Parse(name+".yaml", []byte(fmt.Sprintf(`
listen: { https: "127.0.0.1:0", http: "", admin: "" }
tls: { mode: self-signed, cache: %q }
challenge: { secret_file: %q }
store: { kind: redis, url: %q }
sites: [{ hosts: [localhost], upstream: %s }]
`, filepath.Join(t.TempDir(), "state"), secretFile, url, echoUpstream(t, name).URL)))
	if err != nil {
		t.Fatal(err)
	}
	n := &sealNode{log: &syncBuffer{}}
	n.Server = startServer(t, cfg, slog.New(slog.NewJSONHandler(n.log, nil)))
	return n
}

// logged returns the node's log lines with msg.
func (n *sealNode) logged(msg string) []map[string]any {
	var out []map[string]any
	for line := range strings.Lines(n.log.String()) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// loggedKey reports whether the node logged msg for the store key.
func (n *sealNode) loggedKey(msg, key string) (map[string]any, bool) {
	for _, m := range n.logged(msg) {
		if "maat:blob:"+m["key"].(string) == key {
			return m, true
		}
	}
	return nil, false
}

func writeSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	rand.Read(b)
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStoreSealedInRedis runs edges over one real redis-server:
//
//   - values an older version left in Redis in the clear are read once and
//     sealed when they are PEM (a local CA), and refused when they are not
//     (session ticket keys: planted ones would open every resumed session);
//   - Redis, read directly, holds no PEM, no private key and no session
//     ticket key, only sealed values;
//   - a second node with the same secret opens them: it serves the same CA
//     and resumes the first node's TLS sessions;
//   - a node with another secret cannot open them, says so in its log, and
//     serves with keys of its own.
func TestStoreSealedInRedis(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t)
	rdb := srv.Client()
	ctx := t.Context()

	// What an older version wrote: a local CA in PEM, and ticket keys.
	oldDir := t.TempDir()
	old, err := certs.New(certs.Config{Mode: certs.ModeSelfSigned, CacheDir: oldDir, Hosts: []string{"localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	planted := bytes.Repeat([]byte{0x5a}, 32)
	plantedJSON := fmt.Sprintf(`{"rotated":%q,"keys":[%q,%q]}`, time.Now().UTC().Format(time.RFC3339Nano),
		base64.StdEncoding.EncodeToString(planted), base64.StdEncoding.EncodeToString(planted))
	for k, v := range map[string][]byte{
		redisCACert:     old.RootPEM(),
		redisCAKey:      mustRead(t, filepath.Join(oldDir, "maat-local-ca-key.pem")),
		redisTicketKeys: []byte(plantedJSON),
	} {
		if err := rdb.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	secretFile := writeSecret(t)
	a := startSealNode(t, "a", srv.URL(), secretFile)
	if !bytes.Equal(a.certs.RootPEM(), old.RootPEM()) {
		t.Error("node a does not serve the CA an older version left in Redis")
	}
	for _, k := range []string{redisCACert, redisCAKey} {
		if _, ok := a.loggedKey("store_value_resealed", k); !ok {
			t.Errorf("node a did not log store_value_resealed for %s:\n%s", k, a.log)
		}
	}
	if m, ok := a.loggedKey("store_value_refused", redisTicketKeys); !ok || !strings.Contains(m["error"].(string), "without a seal") {
		t.Errorf("node a did not refuse the plain ticket keys (%v):\n%s", m, a.log)
	}
	sealer, err := store.NewSealer(secret.Derive(mustRead(t, secretFile), sealPurpose))
	if err != nil {
		t.Fatal(err)
	}
	var tickets []byte // the shared ticket keys, once node a wrote them
	if !waitFor(t, 10*time.Second, func() bool {
		v, err := rdb.Get(ctx, redisTicketKeys).Bytes()
		if err == nil && store.IsSealed(v) {
			tickets, err = sealer.Open(redisTicketKeys, v)
			return err == nil
		}
		return false
	}) {
		t.Fatal("node a did not write its session ticket keys to Redis sealed")
	}
	var set struct{ Keys [][]byte }
	if err := json.Unmarshal(tickets, &set); err != nil || len(set.Keys) < 2 {
		t.Fatalf("ticket keys %q: %v", tickets, err)
	}
	for _, k := range set.Keys {
		if bytes.Equal(k, planted) {
			t.Error("node a took the ticket keys planted in the clear")
		}
	}

	// Redis holds only sealed values: no PEM, no private key, no ticket key.
	checkRedisSealed(t, rdb, append(set.Keys, planted))

	// Node b, with the same secret, shares the CA and the ticket keys.
	b := startSealNode(t, "b", srv.URL(), secretFile)
	if !bytes.Equal(b.certs.RootPEM(), old.RootPEM()) {
		t.Error("node b, with the same secret, does not serve the shared CA")
	}
	if n := len(b.logged("store_value_refused")); n != 0 {
		t.Errorf("node b refused %d values:\n%s", n, b.log)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(old.RootPEM())
	sessions := tls.NewLRUClientSessionCache(4)
	if resumed := handshake(t, a.Addrs().HTTPS, roots, sessions); resumed {
		t.Fatal("the first handshake with node a resumed")
	}
	if !handshake(t, b.Addrs().HTTPS, roots, sessions) {
		t.Error("a session of node a does not resume on node b: the ticket keys are not shared")
	}
	checkRedisSealed(t, rdb, set.Keys)

	// Node c, with another secret, opens nothing, says why, and serves.
	c := startSealNode(t, "c", srv.URL(), writeSecret(t))
	m, ok := c.loggedKey("store_value_refused", redisCACert)
	if !ok || !strings.Contains(m["error"].(string), "sealed with another key") {
		t.Fatalf("node c did not say that the CA is sealed with another key (%v):\n%s", m, c.log)
	}
	if bytes.Equal(c.certs.RootPEM(), old.RootPEM()) {
		t.Error("node c, with another secret, serves the shared CA")
	}
	if handshake(t, c.Addrs().HTTPS, x509CertPool(c.certs.RootPEM()), sessions) {
		t.Error("a session of nodes a and b resumed on node c, which has another secret")
	}
}

// handshake connects to addr as localhost with the session cache and
// reports whether the session was resumed. It reads an answer, so that a
// TLS 1.3 session ticket has arrived before it returns.
func handshake(t *testing.T, addr string, roots *x509.CertPool, sessions tls.ClientSessionCache) bool {
	t.Helper()
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "localhost", ClientSessionCache: sessions, NextProtos: []string{"http/1.1"}},
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	res, err := hc.Get("https://" + addr + "/")
	if err != nil {
		t.Fatalf("GET from %s: %v", addr, err)
	}
	readAll(res)
	return res.TLS.DidResume
}

func x509CertPool(pem []byte) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pem)
	return p
}

// checkRedisSealed reads every blob in Redis and fails the test for one
// that is not sealed or holds PEM, a private key, or one of keys (raw or
// in base64).
func checkRedisSealed(t *testing.T, rdb *redis.Client, keys [][]byte) {
	t.Helper()
	ctx := t.Context()
	names, err := rdb.Keys(ctx, "maat:blob:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 3 {
		t.Fatalf("Redis holds %d blobs (%q); want at least three (keys and certificates, session ticket keys)", len(names), names)
	}
	for _, name := range names {
		v, err := rdb.Get(ctx, name).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if !store.IsSealed(v) {
			t.Errorf("%s is not sealed: %q", name, v)
		}
		for _, bad := range [][]byte{[]byte("-----BEGIN"), []byte("PRIVATE KEY"), []byte("CERTIFICATE")} {
			if bytes.Contains(v, bad) {
				t.Errorf("%s holds %q", name, bad)
			}
		}
		for _, k := range keys {
			if bytes.Contains(v, k) || bytes.Contains(v, []byte(base64.StdEncoding.EncodeToString(k))) {
				t.Errorf("%s holds a session ticket key", name)
			}
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
