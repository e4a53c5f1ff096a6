package tlsfp

import (
	"crypto/tls"
	"net"
	"testing"
	"time"
)

// TestResumedHelloKeepsSessionJA4: a real crypto/tls client resuming its
// session (TLS 1.3 PSK, and TLS 1.2 tickets) sends another hello; JA4
// follows the specification (the pre_shared_key extension counts), and
// JA4Session is the JA4 of the full handshake it resumes.
func TestResumedHelloKeepsSessionJA4(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		version   uint16
		psk       bool // a TLS 1.3 resumption carries pre_shared_key
		wantDiffs bool // JA4 of the resumed hello differs from the first
	}{
		{"TLS 1.3", tls.VersionTLS13, true, true},
		{"TLS 1.2", tls.VersionTLS12, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := serverConfig(t)
			// startServer clones the config per connection: one ticket key
			// for all of them, or no ticket could be resumed.
			base.SetSessionTicketKeys([][32]byte{{1, 2, 3}})
			addr, results := startServer(t, base)
			conf := &tls.Config{InsecureSkipVerify: true, ServerName: "localhost", MaxVersion: tt.version,
				ClientSessionCache: tls.NewLRUClientSessionCache(4)}
			var fps []*Fingerprint
			for i := range 2 {
				c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, conf)
				if err != nil {
					t.Fatal(err)
				}
				// TLS 1.3 tickets come after the handshake: read until the
				// server closes the connection, after them (the deadline
				// only bounds a hang).
				_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
				_, _ = c.Read(make([]byte, 1))
				resumed := c.ConnectionState().DidResume
				c.Close()
				res := <-results
				if res.hsErr != nil || res.conn == nil {
					t.Fatalf("connection %d: %v %v", i, res.hsErr, res.connErr)
				}
				if resumed != (i == 1) {
					t.Fatalf("connection %d: resumed %t", i, resumed)
				}
				fps = append(fps, res.conn)
			}
			full, again := fps[0], fps[1]
			if full.Resumption || full.JA4Session != full.JA4 {
				t.Errorf("full handshake: resumption %t, JA4Session %s, JA4 %s", full.Resumption, full.JA4Session, full.JA4)
			}
			if again.Resumption != tt.psk {
				t.Errorf("resumed hello: Resumption %t, want %t", again.Resumption, tt.psk)
			}
			if (again.JA4 != full.JA4) != tt.wantDiffs {
				t.Errorf("resumed JA4 %s, full %s: want them to differ %t", again.JA4, full.JA4, tt.wantDiffs)
			}
			if again.JA4Session != full.JA4 {
				t.Errorf("resumed JA4Session %s, want the full handshake's JA4 %s", again.JA4Session, full.JA4)
			}
		})
	}
}
