// Package testattack holds the attacks of issue 15 (bounded under abuse),
// written once for the attack suite (bench/attack, which runs them against
// an edge process and prints what each cost it) and for the edge's tests
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
// Attackers connect from loopback addresses other than 127.0.0.1 (127.b.x.y,
// one block b per scenario), so that an edge's per-client limits see them
// as the clients they are, and the honest client, at 127.0.0.1, as another.
package testattack
