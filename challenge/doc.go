// Package challenge stands between a visitor and a site: it issues stateless
// proof-of-work and wait challenges, verifies their solutions, and hands out
// a pass cookie bound to the client.
//
// A challenge is a token signed with HMAC-SHA-256 (RFC 2104) under a secret
// shared by every node: version, kind, difficulty in bits, number of
// sub-puzzles, wait, issue and expiry times, the client binding, 16 random
// bytes and the rule that asked for it. There are two kinds: a proof-of-work
// token is redeemed only with its nonces, a wait token only without any and
// only once its wait is over, so that neither stands in for the other.
// Every token on a page is minted for that response. Nothing is stored per
// challenge; a single-use mark ([Marker]) is set when a token is redeemed
// and kept until it expires. A refused redemption (forged, expired, reused,
// roamed, wrong kind, no nonces, wrong solution) gets a 403 page naming the
// reason, reported to [Config].OnFail.
//
// Proof of work: for each sub-puzzle i of k, find a 64-bit nonce whose top
// byte is i such that SHA-256(seed ‖ nonce) (FIPS 180-4) starts with at least
// bits − log2(k) zero bits, where seed is the hexadecimal token MAC (exactly
// one SHA-256 block, so the browser solver precomputes its midstate). The
// expected work stays 2^bits while the slow tail shrinks by √k. Verification
// costs one HMAC and k hashes. The browser searches with a WebAssembly
// module (WebAssembly Core Specification 1.0; generated, see wasm_test.go)
// on the page's own thread, started from an inline script in <head>, and
// at higher difficulties also in one Web Worker per core; worker.js keeps
// a JavaScript search for browsers without WebAssembly. Where the edge offers it ([Spec].Wait), a
// visitor without JavaScript passes after a wait through a <noscript> meta
// refresh (HTML Living Standard §4.2.5.3), and a slow device falls back to
// the same wait; where it does not, the page says that JavaScript is needed
// and why.
//
// The pass cookie is a JSON Web Token (RFC 7519) signed with HS256 (RFC 7518
// §3.2) or EdDSA (RFC 8037), HttpOnly, Secure, SameSite=Lax, named with the
// __Host- prefix (RFC 6265bis §4.1.3.2). It is bound to the client's /24
// (IPv4) or /64 (IPv6) prefix and JA4 fingerprint and records how it was
// earned ("pow" or "wait") and the bits proven (0 for a wait): a wait does
// not pass where a proof of work is asked ([Need]). Verified cookies are
// cached, so the steady-state check is a map hit.
//
// Pages (challenge, deny, rate limited, error) are html/template documents
// with a strict Content-Security-Policy (CSP Level 3: a nonce, and
// 'wasm-unsafe-eval' for the search on challenge pages), gzip, and the
// WCAG 2.2 AA basics, localized through a go-i18n bundle passed in [Config].
// Challenge and deny pages answer 403 unless configured otherwise (Anubis's
// status_codes) and carry Maat-Mitigated: challenge or deny.
package challenge
