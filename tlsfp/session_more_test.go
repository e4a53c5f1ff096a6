package tlsfp

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	utls "github.com/refraction-networking/utls"

	"github.com/maatproxy/maat/internal/testclient"
)

// paddingSpec is a TLS 1.3 ClientHello with the padding extension (RFC
// 7685) when pad is set, as a client sends it whose full handshake is
// padded and whose resumed hello is not: BoringSSL (Chrome
// before its hellos outgrew 512 bytes with a post-quantum key share,
// Android's, Electron's) decides on padding from the hello's length with
// pre_shared_key counted, so a resumed hello, longer by its ticket, drops
// the padding its full handshake had. JA4 counts the padding extension.
func paddingSpec(pad bool) *utls.ClientHelloSpec {
	exts := []utls.TLSExtension{
		&utls.SNIExtension{},
		&utls.ExtendedMasterSecretExtension{},
		&utls.RenegotiationInfoExtension{Renegotiation: utls.RenegotiateOnceAsClient},
		&utls.SupportedCurvesExtension{Curves: []utls.CurveID{utls.X25519, utls.CurveP256}},
		&utls.SupportedPointsExtension{SupportedPoints: []byte{0}},
		&utls.SessionTicketExtension{},
		&utls.ALPNExtension{AlpnProtocols: []string{"http/1.1"}},
		&utls.SignatureAlgorithmsExtension{SupportedSignatureAlgorithms: []utls.SignatureScheme{
			utls.ECDSAWithP256AndSHA256, utls.PSSWithSHA256, utls.PKCS1WithSHA256}},
		&utls.KeyShareExtension{KeyShares: []utls.KeyShare{{Group: utls.X25519}}},
		&utls.PSKKeyExchangeModesExtension{Modes: []uint8{utls.PskModeDHE}},
		&utls.SupportedVersionsExtension{Versions: []uint16{utls.VersionTLS13, utls.VersionTLS12}},
	}
	if pad {
		exts = append(exts, &utls.UtlsPaddingExtension{WillPad: true, PaddingLen: 64})
	}
	exts = append(exts, &utls.UtlsPreSharedKeyExtension{})
	return &utls.ClientHelloSpec{
		CipherSuites: []uint16{utls.TLS_AES_128_GCM_SHA256, utls.TLS_AES_256_GCM_SHA384, utls.TLS_CHACHA20_POLY1305_SHA256,
			utls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, utls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256},
		CompressionMethods: []byte{0},
		Extensions:         exts,
	}
}

// TestSessionPaddingDropped: a client whose resumed hello differs from its
// full handshake in more than pre_shared_key (here: the padding
// extension, as BoringSSL drops it) keeps its full handshake's JA4 only
// through the ticket; from the hello alone JA4Session is another.
func TestSessionPaddingDropped(t *testing.T) {
	t.Parallel()
	base := serverConfig(t)
	for _, tickets := range []bool{false, true} {
		addr, out := startSessionServer(t, base, tickets)
		conf := &utls.Config{InsecureSkipVerify: true, ServerName: "localhost",
			ClientSessionCache: utls.NewLRUClientSessionCache(4), OmitEmptyPsk: true}
		// The third connection resumes the ticket the second (resumed)
		// one issued: it carries the JA4 the second took from its own.
		for _, pad := range []bool{true, false, false} {
			raw, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			c := utls.UClient(raw, conf, utls.HelloCustom)
			if err := c.ApplyPreset(paddingSpec(pad)); err != nil {
				t.Fatal(err)
			}
			if err := c.HandshakeContext(t.Context()); err != nil {
				t.Fatal(err)
			}
			readAnswer(t, c)
			raw.Close()
		}
		full := <-out
		for i := range 2 {
			again := <-out
			if full.resumed || !again.resumed || full.err != nil || again.err != nil {
				t.Fatalf("tickets %t, connection %d: resumed %t %t, errors %v %v", tickets, i+2, full.resumed, again.resumed, full.err, again.err)
			}
			if got := again.fp.JA4Session == full.fp.JA4; got != tickets {
				t.Errorf("tickets %t, connection %d: resumed JA4Session %s, full handshake's JA4 %s: equal %t, want %t",
					tickets, i+2, again.fp.JA4Session, full.fp.JA4, got, tickets)
			}
			if again.fp.JA4 == full.fp.JA4 {
				t.Errorf("tickets %t: the resumed hello's JA4 is the full handshake's %s", tickets, full.fp.JA4)
			}
		}
	}
}

// tamperCache hands the client's tickets back changed: one bit flipped
// (tamper), or another server's ticket (swap, set by the test).
type tamperCache struct {
	tls.ClientSessionCache
	flip bool
	swap *tls.ClientSessionState
}

func (c *tamperCache) Get(key string) (*tls.ClientSessionState, bool) {
	cs, ok := c.ClientSessionCache.Get(key)
	if !ok {
		return cs, ok
	}
	ticket, state, err := cs.ResumptionState()
	if err != nil {
		return nil, false
	}
	if c.swap != nil {
		ticket, _, _ = c.swap.ResumptionState()
	}
	if c.flip {
		ticket = append([]byte(nil), ticket...)
		ticket[len(ticket)/2] ^= 1
	}
	cs, err = tls.NewResumptionState(ticket, state)
	return cs, err == nil
}

// fakeSource is the fingerprint of a server that says any JA4.
type fakeSource struct{ fp *Fingerprint }

func (s fakeSource) Fingerprint() *Fingerprint { return s.fp }

// TestSessionTicketForged: a ticket changed by the client, or sealed by
// another server (which claims another client's JA4 in it), opens no
// session: the handshake is a full one, judged by the hello alone.
func TestSessionTicketForged(t *testing.T) {
	t.Parallel()
	base := serverConfig(t)
	chrome := "t13d1516h2_8daaf6152771_02713d6af862"
	// Another server, with its own ticket keys, that writes Chrome's JA4
	// into its tickets.
	other := serverConfig(t)
	otherConf := SessionConfig(other, fakeSource{&Fingerprint{JA4: chrome, JA4Session: chrome}})
	otherLn, err := tls.Listen("tcp", "127.0.0.1:0", otherConf)
	if err != nil {
		t.Fatal(err)
	}
	defer otherLn.Close()
	go func() {
		for {
			c, err := otherLn.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				_ = c.(*tls.Conn).Handshake()
				_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			}()
		}
	}()
	foreign := tls.NewLRUClientSessionCache(4)
	goGet(t, otherLn.Addr().String(), &tls.Config{InsecureSkipVerify: true, ServerName: "localhost", ClientSessionCache: foreign})
	swap, ok := foreign.Get("localhost")
	if !ok {
		t.Fatal("no ticket from the other server")
	}
	foreign.Put("localhost", swap)

	for _, tt := range []struct {
		name  string
		cache *tamperCache
	}{
		{"bit flipped", &tamperCache{ClientSessionCache: tls.NewLRUClientSessionCache(4), flip: true}},
		{"another server's ticket", &tamperCache{ClientSessionCache: tls.NewLRUClientSessionCache(4), swap: swap}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr, out := startSessionServer(t, base, true)
			conf := &tls.Config{InsecureSkipVerify: true, ServerName: "localhost", ClientSessionCache: tt.cache}
			goGet(t, addr, conf)
			goGet(t, addr, conf)
			full, again := <-out, <-out
			if full.err != nil || again.err != nil || again.resumed {
				t.Fatalf("errors %v %v, resumed %t; want a full handshake", full.err, again.err, again.resumed)
			}
			if !again.fp.Resumption || again.fp.JA4Session != full.fp.JA4 || again.fp.JA4Session == chrome {
				t.Errorf("offered a bad ticket: Resumption %t, JA4Session %s; want the hello's own, %s",
					again.fp.Resumption, again.fp.JA4Session, full.fp.JA4)
			}
		})
	}
}

// TestSessionOtherStack: a session resumed by a hello with other cipher
// suites than the full handshake's (another TLS stack holding the
// session) keeps the hello's own JA4Session, not the ticket's. And TLS
// 1.2 tickets carry the JA4 too (crypto/tls calls WrapSession,
// UnwrapSession and VerifyConnection for them as for TLS 1.3).
func TestSessionOtherStack(t *testing.T) {
	t.Parallel()
	base := serverConfig(t)
	addr, out := startSessionServer(t, base, true)
	cache := tls.NewLRUClientSessionCache(4)
	conf := func(suites ...uint16) *tls.Config {
		return &tls.Config{InsecureSkipVerify: true, ServerName: "localhost", MaxVersion: tls.VersionTLS12,
			CipherSuites: suites, ClientSessionCache: cache}
	}
	a := conf(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384)
	b := conf(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)
	goGet(t, addr, a)
	goGet(t, addr, a)
	goGet(t, addr, b)
	full, same, other := <-out, <-out, <-out
	if full.resumed || !same.resumed || !other.resumed {
		t.Fatalf("resumed %t %t %t, want false true true", full.resumed, same.resumed, other.resumed)
	}
	if same.fp.JA4Session != full.fp.JA4 {
		t.Errorf("TLS 1.2 resumed by the same stack: JA4Session %s, want %s", same.fp.JA4Session, full.fp.JA4)
	}
	if other.fp.JA4Session != other.fp.JA4 || other.fp.JA4 == full.fp.JA4 {
		t.Errorf("resumed by other cipher suites: JA4Session %s, JA4 %s; want its own JA4, not the ticket's %s",
			other.fp.JA4Session, other.fp.JA4, full.fp.JA4)
	}
}

// BenchmarkSessionHandshake measures a TLS 1.3 handshake and the exchange
// of one byte (which carries the session ticket to the client), in
// memory, through a capturing Conn: a full handshake and a resumed one,
// with crypto/tls's own tickets (plain) and with SessionConfig's
// (tickets). The difference is SessionConfig's cost per connection.
func BenchmarkSessionHandshake(b *testing.B) {
	base, err := testclient.ServerConfig()
	if err != nil {
		b.Fatal(err)
	}
	cfg := &Config{}
	run := func(b *testing.B, resume, tickets bool) {
		cache := tls.NewLRUClientSessionCache(4)
		clientConf := &tls.Config{ServerName: "localhost", InsecureSkipVerify: true, NextProtos: []string{"h2"}, ClientSessionCache: cache}
		done := make(chan error, 1)
		conn := func() bool {
			c1, c2 := net.Pipe()
			defer c1.Close()
			defer c2.Close()
			sc := newConn(c2, cfg)
			conf := base
			if tickets {
				conf = SessionConfig(base, sc)
			}
			go func() {
				tc := tls.Client(c1, clientConf)
				if err := tc.Handshake(); err != nil {
					done <- err
					return
				}
				_, err := tc.Read(make([]byte, 1))
				done <- err
			}()
			tc := tls.Server(sc, conf)
			if err := tc.Handshake(); err != nil {
				b.Fatal(err)
			}
			if _, err := tc.Write([]byte{1}); err != nil {
				b.Fatal(err)
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			return tc.ConnectionState().DidResume
		}
		if resume {
			conn()
		}
		b.ReportAllocs()
		for b.Loop() {
			if !resume {
				clientConf.ClientSessionCache = tls.NewLRUClientSessionCache(4)
			}
			if conn() != resume {
				b.Fatalf("resumed %t, want %t", !resume, resume)
			}
		}
	}
	for _, resume := range []bool{false, true} {
		for _, tickets := range []bool{false, true} {
			name := map[bool]string{false: "full", true: "resumed"}[resume] + "/" + map[bool]string{false: "plain", true: "tickets"}[tickets]
			b.Run(name, func(b *testing.B) { run(b, resume, tickets) })
		}
	}
}

// BenchmarkSessionConfig measures what SessionConfig adds to every
// connection before the handshake: the copy of the server's tls.Config.
func BenchmarkSessionConfig(b *testing.B) {
	base, err := testclient.ServerConfig()
	if err != nil {
		b.Fatal(err)
	}
	src := fakeSource{&Fingerprint{}}
	b.ReportAllocs()
	for b.Loop() {
		_ = SessionConfig(base, src)
	}
}

// TestSessionChainsWrap: a base tls.Config that seals tickets itself
// (WrapSession and UnwrapSession over keys two nodes share, as the edge's
// certificate manager does) keeps doing so under SessionConfig: a ticket
// of one node resumes on the other, with its JA4.
func TestSessionChainsWrap(t *testing.T) {
	t.Parallel()
	keyed := &tls.Config{}
	keyed.SetSessionTicketKeys([][32]byte{{7}})
	nodeOut := map[string]<-chan seenConn{}
	node := func() string {
		base := serverConfig(t)
		base.WrapSession = keyed.EncryptTicket
		base.UnwrapSession = keyed.DecryptTicket
		addr, out := startSessionServer(t, base, true)
		nodeOut[addr] = out
		return addr
	}
	a, b := node(), node()
	conf := &utls.Config{InsecureSkipVerify: true, ServerName: "localhost",
		ClientSessionCache: utls.NewLRUClientSessionCache(4), OmitEmptyPsk: true}
	for i, addr := range []string{a, b} {
		raw, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c := utls.UClient(raw, conf, utls.HelloCustom)
		if err := c.ApplyPreset(paddingSpec(i == 0)); err != nil {
			t.Fatal(err)
		}
		if err := c.HandshakeContext(t.Context()); err != nil {
			t.Fatal(err)
		}
		readAnswer(t, c)
		raw.Close()
	}
	full, again := <-nodeOut[a], <-nodeOut[b]
	if !again.resumed || again.fp.JA4Session != full.fp.JA4 {
		t.Errorf("other node: resumed %t, JA4Session %s; want the first node's session and its JA4 %s",
			again.resumed, again.fp.JA4Session, full.fp.JA4)
	}
}
