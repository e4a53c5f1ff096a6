// Package testattack holds the attacks of issue 15 (bounded under abuse)
// and the gate attacks of issue 33 (bypass tries), written once for the
// attack suite (bench/attack, which runs them against an edge process and
// prints what each cost it, or what got through) and for the edge's tests
// (which run a short version of each and assert that nothing is left
// behind). It is test support: it never reaches the edge binary.
//
// Each attack is a Scenario run against a Target (the edge's listeners and
// the upstream behind it), bounded in count and time, and stopping by
// itself: when the edge has answered or cut everything it sent, or when
// Params.Hold has passed, whichever comes first. What the attackers were
// answered is tallied in an Outcome; what the edge spent (goroutines,
// memory, CPU) is for the caller to measure, from outside.
//
// The attacks:
//   - HTTP/2 rapid reset (CVE-2023-44487): streams opened and cancelled at
//     once with RST_STREAM (RFC 9113, section 6.4).
//   - HTTP/2 requests whose body never comes: HEADERS without END_STREAM
//     (RFC 9113, section 8.1).
//   - Slow bodies ("slow POST", R-U-Dead-Yet): HTTP/1.1 bodies trickled a
//     byte at a time (RFC 9112, section 6).
//   - Slow readers: large responses nobody reads, on HTTP/1.1 and behind a
//     zero HTTP/2 flow-control window (RFC 9113, section 6.9).
//   - Idle HTTP/2 connections, each after one request, and idle HTTP/1.1
//     keep-alive connections the same way.
//   - Wrong basic-auth passwords (RFC 7617), each one a bcrypt for the edge.
//   - Abandoned QUIC handshakes: Initials from clients that never read a
//     reply (RFC 9000, section 8.1: what Retry is for).
//   - Oversized header sections: a long HPACK-encoded header list in
//     HEADERS and CONTINUATION frames (RFC 9113, section 6.10; RFC 7541),
//     and a long HTTP/1.1 header field.
//
// The gate attacks of issue 33 (gate.go) try to get past the edge rather
// than wear it down, each a GateCase against a GateTarget whose rows say
// how often a bypass try got through, and how often an honest try was
// refused:
//   - A path behind basic auth spelled otherwise (case, ";params", dot
//     and space suffixes, "..;", percent-encodings, overlong UTF-8,
//     backslashes) on HTTP/1.1, HTTP/2 and HTTP/3; the upstream records
//     what reaches it (Upstream.Record).
//   - The no-JavaScript wait offered by, or a wait's or 16-bit pass
//     taken by, a rule asking for 28 bits.
//   - A pass earned over QUIC replayed over TCP with another TLS stack
//     from the same /24; a pass used on a resumed TLS session (RFC 8446,
//     section 2.2: pre_shared_key changes the JA4).
//   - utls's Chrome ClientHello with Go's HTTP/2 (RFC 9113, sections 6.5
//     and 8.3), compared with a real Chromium's fingerprint log line.
//   - X-Forwarded-For with ports, brackets, hidden and malformed entries
//     (RFC 7239, section 6) from a trusted proxy.
//   - A Location with userinfo or another host (RFC 3986, section 3.2.1;
//     the WHATWG URL standard's reading of backslashes).
//   - What a diverted request carries to the tarpit; TRACE (RFC 9110,
//     section 9.3.8).
//
// Attackers connect from loopback addresses other than 127.0.0.1 (127.b.x.y,
// one block b per scenario), so that an edge's per-client limits see them
// as the clients they are, and the honest client, at 127.0.0.1, as another.
package testattack
