// Package httpfp fingerprints HTTP clients by what net/http and
// golang.org/x/net/http2 throw away: the order in which a client sends its
// header names, and the way it opens an HTTP/2 connection.
//
// # Capture
//
// Go's http.Header is a map, so the order is taken from the wire. NewConn
// wraps a connection that a server reads from and taps its Read calls; the
// bytes pass through unchanged, but where the tap ends an HTTP/2
// connection (see Header block bounds).
//
//   - HTTP/1.x (RFC 9112): the tap follows message framing (Content-Length,
//     chunked bodies with trailers, bodies after Expect: 100-continue) so that
//     every request of a keep-alive or pipelined connection gets its own
//     header list. After a request that asks for an Upgrade, or a CONNECT, the
//     bytes that follow may be another protocol: the tap stops there, and later
//     requests of that connection have no fingerprint.
//   - HTTP/2 (RFC 9113, RFC 7541): the tap decodes the client's frames in step
//     with the server, keeping its own HPACK decoder in sync over HEADERS and
//     CONTINUATION of every stream (trailers included), and records the
//     client's first SETTINGS, its connection WINDOW_UPDATE and PRIORITY
//     frames.
//   - HTTP/3 (RFC 9114, RFC 9204): quic-go decodes QPACK itself. Its qlog
//     trace reports each parsed HEADERS frame with the fields in order before
//     the handler runs; H3Tracer and NewH3Context hook into it without a fork
//     (see H3Tracer for the cost). Without that hook, NewH3Fingerprint builds
//     a fingerprint from an http.Request with Ordered false.
//
// Handler (or FromRequest) pairs each captured header list with the
// *http.Request the server hands to its handler. On HTTP/1 requests are
// served in order: the first captured request with r's method and request
// target (earlier ones were answered without a handler, like OPTIONS *). On
// HTTP/2 and HTTP/3 streams run concurrently and the server does not tell
// the handler its stream: the oldest captured request with r's method,
// authority and path, and when several have them, the oldest whose fields
// (an order-independent hash of names and values) are those of r.Header.
// Wrap the handler first, before anything edits r.Header.
//
// What the order shows depends on the client: curl and Chromium send a
// fixed order; Go's HTTP/1.1 client sorts header names, its HTTP/2 and
// HTTP/3 clients send them in map order, which changes between requests;
// Chromium's fetch() puts the headers a page sets in its own order.
//
// A byte stream that does not parse stops the tap: later requests have no
// fingerprint, and Conn.Err says why. On HTTP/1 the connection keeps
// working (the server closes it on its own protocol error). On HTTP/2 an
// HPACK error stops only the fingerprints; after frames the tap cannot
// follow (which the server refuses too: the tap refuses only what RFC 9113
// makes connection errors) the Conn's reads fail. The tap never panics on
// input.
//
// # Header block bounds
//
// The HTTP/2 tap is in the path of every frame a client sends, so it bounds
// what a server's header list limit does not: the frames of one header
// block (HEADERS and its CONTINUATIONs) to 128, and their bytes to twice
// MaxHeaderBytes plus 16 KiB. Empty CONTINUATIONs, or ones whose bytes
// decode to nothing, would otherwise keep a server reading one block for
// ever (CVE-2023-45288's class). The frame past a bound is passed on up to
// its frame header only, and reads fail from then on with ErrFlood, which
// ends the connection. A CONTINUATION's header is passed on with its stream
// changed: the server meets a connection error of type PROTOCOL_ERROR (RFC
// 9113, section 6.10) there and sends its GOAWAY.
//
// # Memory
//
// A Conn holds at most 256 fingerprints that no handler took yet, and no
// more than twice MaxHeaderBytes of them, evicting the oldest. The HTTP/1 tap buffers only the method, request target and
// header names of the message being read (plus, with JA4H, the Cookie and
// Accept-Language values), never more than MaxHeaderBytes+4096 (the slack
// net/http allows); header values are skipped, bodies are counted, not
// read. The HTTP/2 tap streams HEADERS payloads into its HPACK decoder and
// never buffers a frame; its dynamic table is bounded like the server's
// (4096 bytes unless the client was allowed more; the tap accepts up to
// 64 KiB, the server closes a connection that takes more than it allowed).
// Each Conn also keeps its last header list and hfp, which clients repeat.
// Measured after a Chromium-like request was taken (TestIdleMemory): about
// 2 KiB per idle HTTP/1.1 connection and 3.6 KiB per idle HTTP/2
// connection, HPACK table included.
//
// # Fingerprints
//
// hfp_r is the header names as sent, lowercased, joined with ","; HTTP/2 and
// HTTP/3 pseudo-headers are included where they stand; "cookie" and "referer"
// are left out (their presence changes from page to page, not from client to
// client). hfp is "h1", "h2" or "h3", then the number of names in hfp_r as two
// digits (99 at most), "_", and the first 12 hex digits of SHA-256(hfp_r),
// for example "h217_6f1c2d9a3b4e". Both are stable.
//
// h2fp is the Akamai HTTP/2 fingerprint (Shuster, Segal: "Passive
// Fingerprinting of HTTP/2 Clients", Black Hat EU 2017):
// SETTINGS|WINDOW_UPDATE|PRIORITY|PSEUDO_HEADER_ORDER, that is the client's
// first SETTINGS as id:value in wire order joined by ";", the first
// connection WINDOW_UPDATE increment ("00" if none), PRIORITY frames sent
// before the first request as stream:exclusive:dependency:weight joined by
// "," ("0" if none), and the first request's pseudo-headers as letters m, a,
// s, p joined by ",".
//
// JA4H (FoxIO, https://github.com/FoxIO-LLC/ja4, technical details in
// JA4H.md) is licensed under the FoxIO License 1.1: free for non-commercial
// use only, patent pending. It is computed only when Config.JA4H is set.
// HTTP/2 and HTTP/3 pseudo-headers are not counted, as FoxIO's Python tool and
// Wireshark plugin do.
package httpfp
