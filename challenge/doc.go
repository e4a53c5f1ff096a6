// Package challenge stands between a visitor and a site: it issues stateless
// proof-of-work and meta-refresh challenges, verifies their solutions, and
// hands out a pass cookie bound to the client.
//
// A challenge is a token signed with HMAC-SHA-256 (RFC 2104) under a secret
// shared by every node: version, algorithm, difficulty in bits, number of
// sub-puzzles, wait, issue and expiry times, the client binding, 16 random
// bytes and the rule that asked for it. Nothing is stored per challenge; a
// single-use mark ([Marker]) is set when a solution is redeemed and kept until
// the token expires.
//
// Proof of work: for each sub-puzzle i of k, find a 64-bit nonce whose top
// byte is i such that SHA-256(seed ‖ nonce) (FIPS 180-4) starts with at least
// bits − log2(k) zero bits, where seed is the hexadecimal token MAC (exactly
// one SHA-256 block, so the browser solver precomputes its midstate). The
// expected work stays 2^bits while the slow tail shrinks by √k. Verification
// costs one HMAC and k hashes. A visitor without JavaScript passes after a
// wait through a <noscript> meta refresh (HTML Living Standard §4.2.5.3), and
// a slow device falls back to the same wait path.
//
// The pass cookie is a JSON Web Token (RFC 7519) signed with HS256 (RFC 7518
// §3.2) or EdDSA (RFC 8037), HttpOnly, Secure, SameSite=Lax, named with the
// __Host- prefix (RFC 6265bis §4.1.3.2). It is bound to the client's /24
// (IPv4) or /64 (IPv6) prefix and JA4 fingerprint and records the difficulty
// passed; verified cookies are cached, so the steady-state check is a map hit.
//
// Pages (challenge, deny, rate limited, error) are html/template documents
// with a strict Content-Security-Policy (CSP Level 3) nonce, gzip, and the
// WCAG 2.2 AA basics, localized through a go-i18n bundle passed in [Config].
package challenge
