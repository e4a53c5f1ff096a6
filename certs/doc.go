// Package certs provides the TLS certificates of the edge: automatic
// certificates from an ACME certificate authority, a self-signed local CA for
// development and the demo, or certificate and key files.
//
// ACME follows RFC 8555 (Automatic Certificate Management Environment) with
// the http-01 challenge (RFC 8555, section 8.3) answered by
// [Manager.HTTPHandler] on port 80 and the tls-alpn-01 challenge (RFC 8737)
// answered by [Manager.GetCertificate] on port 443, External Account Binding
// (RFC 8555, section 7.3.4) when the CA needs it, and ECDSA P-256 keys
// (FIPS 186-5, SEC 2). The protocol client is golang.org/x/crypto/acme; the
// cache format and cache keys are those of golang.org/x/crypto/acme/autocert,
// so either can read what the other wrote, and [DirCache] is autocert's
// directory cache.
//
// Certificates are ordered only for the names in [Config.Hosts]: a handshake
// for any other name gets [ErrUnknownHost] and never causes an order, so that
// nobody can spend the CA's rate limits by sending made-up names.
// [Manager.Run] obtains missing certificates and renews them ahead of expiry
// in the background; a failed order keeps the current certificate, is retried
// with exponential backoff and shows in [Manager.Status]; each name is
// ordered on its own, so one name that cannot get a certificate never holds
// back the others.
// A handshake for a configured name without a certificate orders one and
// waits for it (unless a failed order waits for its retry time). Several
// nodes may share a [Cache]; if it also implements [Locker], one node orders
// a name and the others read the result, and challenge answers go through
// the cache so that whichever node the CA reaches can answer. Renewals are
// coordinated the same way (nodes asked to renew at once make one order),
// and the nodes read the cache again every [Config.RecheckInterval] to serve
// what another renewed. A lock holder that dies loses its lock when the
// lock expires, and another node orders then. [LayeredCache] puts a shared
// cache over a local directory, which keeps a warm copy and serves when the
// shared one is away; [StorageCache] makes a Cache and a Locker of the
// edge's store without importing it.
//
// TLS session tickets (RFC 8446, section 4.6.1; RFC 5077 for TLS 1.2) are
// encrypted with keys that [Manager.Run] rotates every [TicketKeyRotation],
// keeping the two previous keys for decryption and the next one ready. With
// a shared cache one node, under the lock, rotates and stores the set and
// the others read it, so that a session resumes on any node. The keys are
// secrets: they are stored like certificate keys and never logged or put in
// an event.
//
// ModeSelfSigned makes a local ECDSA P-256 CA once (kept in the cache, or in
// memory without one) and signs a leaf per server name on demand; a hello
// without a server name gets a leaf for localhost, 127.0.0.1 and ::1.
// ModeFiles serves a certificate and key from files, re-read by
// [Manager.Reload].
//
// The package does not log: it returns errors, exposes [Manager.Status] and
// calls [Config.OnEvent], and the caller decides what to log.
package certs
