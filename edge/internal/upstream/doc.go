// Package upstream is the edge's client of the sites' upstreams: it sends
// a request to one of its route's addresses over pooled HTTP/1.1
// connections (RFC 9112), plain, TLS or over a Unix socket, within bounds
// that hold whatever the clients in front do.
//
// # Face
//
// New builds a Transport (an http.RoundTripper) from Options; NewPool gives
// each route its Pool of addresses. The edge puts a Route on each request's
// context (WithRoute: the pool, whom the request counts for, where 1xx
// answers go, what to do when a slow client is cut), picks the first
// address (Route.Pick, from its rewrite), and hands the request to
// httputil.ReverseProxy, or, for the common exchange (Common), to its own
// short path, which uses CommonRequest, RemoveHopHeaders and EventStream
// here. Failures are the sentinel errors ErrQueueFull, ErrStreamsFull,
// ErrConnsFull and ErrReadTimeout, and dial errors (IsDialError), which the
// edge turns into its error pages.
//
// # What it bounds
//
//   - Slots: an address carries at most Options.Conns exchanges at once;
//     a request beyond waits in line, at most Options.Queue, and a freed
//     slot goes to the waiting client that holds the fewest, so that a
//     client queuing hundreds of requests waits behind its own. A small
//     application behind the edge sees at most that many connections.
//   - Streams (websockets, server-sent events, long polls) hold no slot but
//     one of Options.Streams, so that open tabs never starve the site.
//   - Connections: both clients below (the own one and http.Transport)
//     keep idle connections of their own; connLimit holds the connections
//     open to an address, over both, to Options.Conns (streams apart).
//   - Health: an address that cannot be reached is skipped for
//     Options.FailPause, and a request that was not sent is tried on the
//     next address.
//   - Slow clients: with Options.Spill, an answer whose client falls behind
//     is read ahead (package spill), so that the client does not hold the
//     slot; spill sees the slots through its small Slots interface.
//
// # Why an own HTTP/1.1 client, and what it costs
//
// http.Transport hands each exchange to a writing and a reading goroutine
// of the connection: two hand-offs and some forty allocations per request,
// a large part of the edge's budget for a proxied request (DESIGN.md,
// "Performance budgets": at most 1.5× the CPU of net/http proxying with
// nothing of its own). The common exchange — an idempotent request without
// a body or a protocol switch, to a plain-HTTP address, what pages, assets
// and feeds are fetched with — goes through h1Client instead, which writes
// the request and reads the answer on the handler's goroutine. What it
// costs: a second client, whose framing must be the stock one's (it reads
// answers with http.ReadResponse, the parser http.Transport uses), which
// peeks at an idle connection's socket before reusing it (bytes an
// upstream sent unasked must never become another client's answer), and
// two pools of idle connections, capped together. Everything else —
// bodies, 100-continue, early answers, websockets, https:// addresses —
// stays with http.Transport.
//
// # Boundaries
//
// upstream imports, of this module, only edge/internal/spill; never edge
// or edge/config, and no leaf: what it needs of the configuration comes in
// Options, what it needs of a request in its Route. It does not log: it
// returns errors and the edge decides.
//
// # Library behaviour relied on
//
//   - http.ReadResponse judges an answer's framing (Content-Length and
//     Transfer-Encoding, obs-fold, bare LF) as http.Transport does:
//     TestClientFraming.
//   - httptrace.ClientTrace.GotConn reports the very net.Conn the
//     Transport's DialContext or DialTLSContext returned, through which a
//     stream's connection leaves the count of Options.Conns:
//     TestGotConnIsTheDialedConn.
//   - Closing an http.Transport answer's body ends a Read of it under way
//     on another goroutine (a spill's drainer reads as the handler closes);
//     the own client's bodies do so by design:
//     TestTransportBodyCloseEndsRead, TestClientCloseDuringRead.
package upstream
