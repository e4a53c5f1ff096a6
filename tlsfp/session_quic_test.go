package tlsfp

import (
	"context"
	"crypto/tls"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// putSignal is a client session cache that says when a ticket arrived.
type putSignal struct {
	tls.ClientSessionCache
	put chan struct{}
}

func (c *putSignal) Put(key string, cs *tls.ClientSessionState) {
	c.ClientSessionCache.Put(key, cs)
	if cs != nil {
		select {
		case c.put <- struct{}{}:
		default:
		}
	}
}

// TestSessionQUIC: over QUIC (quic-go, whose own entries share the
// tickets), SessionConfig returned by GetConfigForClient for the
// connection's Capture writes the JA4 into the session's tickets, and a
// resumed connection reads it back.
func TestSessionQUIC(t *testing.T) {
	t.Parallel()
	tr := quicLoopback(t)
	keyed := &tls.Config{}
	keyed.SetSessionTicketKeys([][32]byte{{9}})
	var mu sync.Mutex
	var opened []string // the entries of SessionConfig in the tickets the server opened
	base := serverConfig(t)
	base.NextProtos = []string{"h3"}
	base.WrapSession = keyed.EncryptTicket
	base.UnwrapSession = func(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
		ss, err := keyed.DecryptTicket(identity, cs)
		if ss != nil {
			mu.Lock()
			for _, e := range ss.Extra {
				if v, ok := strings.CutPrefix(string(e), ticketTag); ok {
					opened = append(opened, v)
				}
			}
			mu.Unlock()
		}
		return ss, err
	}
	conf := base.Clone()
	conf.GetConfigForClient = GetConfigForClient(func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
		src, ok := SourceFromContext(chi.Context())
		if !ok {
			t.Error("no Source in the handshake's context")
			return nil, nil
		}
		return SessionConfig(base, src), nil
	})
	ln, err := tr.Listen(conf, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cache := &putSignal{ClientSessionCache: tls.NewLRUClientSessionCache(4), put: make(chan struct{}, 1)}
	clientConf := &tls.Config{ServerName: "localhost", InsecureSkipVerify: true, NextProtos: []string{"h3"}, ClientSessionCache: cache}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var fps []*Fingerprint
	for i := range 2 {
		client, err := quic.DialAddr(ctx, tr.Conn.LocalAddr().String(), clientConf, nil)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := ln.Accept(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			select {
			case <-cache.put:
			case <-ctx.Done():
				t.Fatal("no session ticket")
			}
		}
		if got := client.ConnectionState().TLS.DidResume; got != (i == 1) {
			t.Fatalf("connection %d: resumed %t", i, got)
		}
		fps = append(fps, FromContext(sc.Context()))
		sc.CloseWithError(0, "")
		client.CloseWithError(0, "")
	}
	full, again := fps[0], fps[1]
	if !again.Resumption || again.JA4 == full.JA4 || again.JA4Session != full.JA4 || !strings.HasPrefix(full.JA4, "q13") {
		t.Errorf("resumed: Resumption %t, JA4 %s, JA4Session %s; full handshake's JA4 %s", again.Resumption, again.JA4, again.JA4Session, full.JA4)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(opened) != 1 || opened[0] != full.JA4 {
		t.Errorf("the server opened tickets with the JA4s %q, want one, %s", opened, full.JA4)
	}
}
