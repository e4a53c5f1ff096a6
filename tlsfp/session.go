package tlsfp

import (
	"crypto/tls"
	"strings"
)

// ticketTag starts the entry that SessionConfig adds to a session's
// tls.SessionState.Extra: the tag, then the JA4 of the session's full
// handshake. crypto/tls asks that each user of Extra prefix its entries
// with a unique identifier (quic-go and its http3 add their own).
const ticketTag = "maat-tlsfp-ja4\x00"

// SessionConfig returns a copy of base for one server connection whose
// fingerprint src gives (a [*Conn], or the [*Capture] of a QUIC connection),
// for session tickets that remember the client's TLS stack:
//
//   - every ticket the connection issues (crypto/tls's
//     Config.WrapSession) carries the JA4 of the session's full handshake:
//     the JA4 a resumed connection took from its ticket, else the hello's
//     [Fingerprint.JA4Session];
//   - when the connection resumes a ticket that carries one (RFC 8446
//     §2.2; crypto/tls's Config.UnwrapSession, then VerifyConnection with
//     DidResume set), src's fingerprint takes JA4Session from it, and
//     Client when the table knows that JA4. JA4 itself stays FoxIO's JA4
//     of the hello as sent.
//
// Tickets are sealed as base seals them: by its WrapSession and
// UnwrapSession when it sets them (the entry rides in the SessionState they
// are given, as quic-go's own entries do), else with its session ticket
// keys (Config.EncryptTicket, Config.DecryptTicket: AES-CTR and
// HMAC-SHA256, rotated by crypto/tls, or those set with
// SetSessionTicketKeys). Either way a client cannot write or change the
// JA4 of one, and a ticket that does not open is no session, so the
// handshake is a full one. A ticket without the entry
// (issued before, or by a server without SessionConfig) resumes as before,
// judged by the hello's JA4Session. The JA4 of a ticket is taken only when
// the resumed hello is of the same transport and offers the same cipher
// suites (JA4's first character and part b agree), which every client
// resuming its own session does.
//
// base's VerifyConnection, if any, still runs. base is read, never
// written, and may serve many connections at once, as tls.Config allows.
func SessionConfig(base *tls.Config, src Source) *tls.Config {
	// crypto/tls gives a Config that has not made its ticket keys yet
	// (the first handshake does) keys of its own when it is cloned
	// (golang.org/issue/60506): make base's first, so that the copy
	// shares them instead of making some for every connection.
	_, _ = base.DecryptTicket(nil, tls.ConnectionState{})
	s := &session{base: base, src: src}
	conf := base.Clone()
	conf.WrapSession = s.wrap
	conf.UnwrapSession = s.unwrap
	conf.VerifyConnection = s.verify
	return conf
}

// session is the state of one connection's handshake, used only in the
// handshake's goroutine.
type session struct {
	base *tls.Config
	src  Source
	// ticketJA4 is the JA4 in the last ticket that opened, "" if it
	// carried none. crypto/tls opens the client's identities in order and
	// resumes the first it accepts, so when the handshake resumes, it is
	// that ticket's.
	ticketJA4 string
}

func (s *session) unwrap(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
	var ss *tls.SessionState
	var err error
	if s.base.UnwrapSession != nil {
		ss, err = s.base.UnwrapSession(identity, cs)
	} else {
		ss, err = s.base.DecryptTicket(identity, cs)
	}
	if ss == nil || err != nil {
		return ss, err
	}
	s.ticketJA4 = ""
	for _, e := range ss.Extra {
		if v, ok := strings.CutPrefix(string(e), ticketTag); ok {
			s.ticketJA4 = v
		}
	}
	return ss, nil
}

// sessionJA4 is the JA4 of the session's full handshake as far as this
// connection knows it: the resumed ticket's, else the hello's JA4Session.
func (s *session) sessionJA4(cs tls.ConnectionState) string {
	fp := s.src.Fingerprint()
	if fp == nil {
		return ""
	}
	if cs.DidResume && s.ticketJA4 != "" && sameStack(s.ticketJA4, fp.JA4) {
		return s.ticketJA4
	}
	return fp.JA4Session
}

func (s *session) wrap(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
	if ja4 := s.sessionJA4(cs); ja4 != "" {
		ss.Extra = append(ss.Extra, []byte(ticketTag+ja4))
	}
	if s.base.WrapSession != nil {
		return s.base.WrapSession(cs, ss)
	}
	return s.base.EncryptTicket(cs, ss)
}

// verify runs when the handshake has chosen whether to resume (for full
// and resumed handshakes alike), before the connection carries any
// request: a resumed session's fingerprint takes its ticket's JA4.
func (s *session) verify(cs tls.ConnectionState) error {
	if fp := s.src.Fingerprint(); fp != nil && cs.DidResume {
		if ja4 := s.sessionJA4(cs); ja4 != fp.JA4Session {
			fp.JA4Session = ja4
			if c, ok := LookupClient(ja4); ok {
				fp.Client = c
			}
		}
	}
	if s.base.VerifyConnection != nil {
		return s.base.VerifyConnection(cs)
	}
	return nil
}

// sameStack reports whether two JA4 fingerprints are of the same
// transport ("t" or "q") and the same cipher suites (part b), as the
// full handshake and the resumed hello of one client are.
func sameStack(a, b string) bool {
	ab, aok := partB(a)
	bb, bok := partB(b)
	return aok && bok && a[0] == b[0] && ab == bb
}

// partB is the part b of a JA4 fingerprint (a_b_c).
func partB(ja4 string) (string, bool) {
	_, rest, ok := strings.Cut(ja4, "_")
	if !ok {
		return "", false
	}
	b, _, ok := strings.Cut(rest, "_")
	return b, ok && len(b) == hashLen
}
