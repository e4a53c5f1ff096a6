// Package tlsfp fingerprints TLS clients by their ClientHello: it parses the
// hello from raw bytes, computes JA4 and its raw and original-order variants,
// captures the hello of every TCP connection before crypto/tls sees it, takes
// the hello of QUIC connections from crypto/tls's ClientHelloInfo, and names
// well-known clients from a generated table.
//
// Specifications:
//   - JA4, JA4_r, JA4_o, JA4_ro: FoxIO's JA4 technical details
//     (https://github.com/FoxIO-LLC/ja4, technical_details/JA4.md, BSD-3-Clause),
//     with the decisions recorded in the package tests: a non-alphanumeric
//     first ALPN value uses the first and last characters of its hex form, a
//     one-character ALPN value repeats that character, and JA4_o hashes the
//     wire-order extension list even when the sorted list (without SNI and
//     ALPN) is empty. GREASE values (RFC 8701) are ignored everywhere.
//   - ClientHello: RFC 8446 §4.1.2 (and RFC 5246 §7.4.1.2 for TLS 1.2 and
//     earlier), records: RFC 8446 §5.1, extensions: RFC 6066 §3 (server_name),
//     RFC 7301 §3.1 (ALPN), RFC 8446 §4.2.1 (supported_versions), §4.2.3
//     (signature_algorithms), §4.2.11 (pre_shared_key).
//   - QUIC: RFC 9001 (TLS carried in QUIC CRYPTO frames; JA4 prefix "q").
//
// On TCP, wrap the listener with [NewListener]; each accepted [*Conn] reads
// the whole ClientHello (bounded in size and time) on its first Read,
// fingerprints it and replays the bytes unchanged to crypto/tls. On QUIC,
// put a [*Capture] in the connection's context and wrap the tls.Config's
// GetConfigForClient with [GetConfigForClient]. Either way, [FromContext]
// returns the connection's [*Fingerprint].
//
// Most connections come from clients seen before: everything in a
// fingerprint except what depends on the extensions' wire order (which
// Chrome shuffles on every connection) is kept in a small, bounded,
// process-wide cache, keyed by the exact lists it was computed from.
//
// The package never logs: a hello that cannot be fingerprinted is reported
// through [Config.OnError] and [Conn.Err].
package tlsfp
