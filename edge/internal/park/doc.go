// Package park parks idle HTTP/1.1 client connections: it takes a
// connection out of net/http's hands while it waits for its next request,
// so that it holds neither net/http's buffers nor a goroutine, and hands it
// back, as a new connection, at its next byte.
//
// # Why
//
// net/http keeps a 4 KiB read buffer, a 4 KiB write buffer and a goroutine
// whose stack grew with the last request for as long as a connection lives,
// idle or not, and a browser keeps a connection idle for minutes. Resident
// memory of the edge per idle HTTP/1.1 connection over TLS, measured as
// parking came: with 3,000 connections, 42.6 KB held by net/http, 17.2 KB
// parked on a goroutine each, 14.2 KB parked in one epoll set; with 5,000
// opened at a thousand a second (make bench-peers), 13.5 KB parked after
// 250 ms and 17.3 KB after one second, the memory the connections not yet
// parked took staying with the process. DESIGN.md's budget is 16 KiB per
// idle connection. Hence limits.park_after's default of 250 ms: long
// enough that a client sending its next request at once (a benchmark, a
// page's subresources) does not pay for the hand-over, short enough that
// the connections of a burst of clients are not all held whole at once.
//
// # What it costs
//
// A wake gives the request that comes with it a new net/http connection to
// set up: 60 allocations and 4.4 KB where a request on a connection
// net/http held takes 28 and 2.8 KB, client side included
// (BenchmarkParkRequest, which times both). Parking takes an epoll
// registration and a timer. A connection parks only after net/http has
// waited Options.After for its next request, so a client that sends its
// next request at once (a benchmark, a page's subresources) never pays
// for it. The client sees nothing of it, and the idle timeout net/http set
// runs on as it did: the Parker closes a parked connection when it passes.
//
// # How
//
// Parker.Wrap wraps the connection it gives to the http.Server in a Conn,
// which follows net/http's calls to find the Read that waits for the next
// request. When that Read has waited Options.After, with no request in
// flight and no byte of one in net/http's buffer (httpfp's tap stands at
// rest), it returns io.EOF: net/http ends its hold on the connection and
// calls Close, which hands the connection to the Parker. The Parker waits,
// with no buffer, for the socket to become readable: on Linux in one epoll
// set for every parked connection, elsewhere on a small goroutine of its
// own (not at all where a socket cannot be peeked at). When it is, the
// Parker reads the first byte through TLS and gives the connection back
// to the Host (Host.Resume), that byte first; a close_notify alert or a
// bare FIN ends it there, and a wake without a whole record by After (and
// at least 100 ms, whatever After: TestParkTinyAfter) parks it again.
//
// HTTP/2 connections are not parked: x/net's HTTP/2 server, which serves
// them, has no supported way to let go of a connection and take it up
// again, and keeps two goroutines and its connection state (about 50 KB
// in all) for as long as a connection lives. Give Wrap HTTP/1 connections
// only.
//
// # What parking relies on
//
// Each behaviour below is pinned by the test named; a Go release that
// changes one fails that test.
//
// net/http's server (conn.serve):
//   - After each request it keeps the connection for, it calls
//     ConnState(StateIdle), then SetReadDeadline once (the idle timeout),
//     then waits for the next request with a Peek of 4 bytes on its
//     buffer, which reads the connection only when it holds fewer. So a
//     Read with no other call since that SetReadDeadline is that wait's.
//     (TestNetHTTPParkContract/idle, TestParkKeepsUnreadBytes)
//   - A new connection's first calls are SetReadDeadline (the header
//     timeout, when there is one; without, it does not park before its
//     first request) and the Read of its first request: it waits for its
//     first request as for any other. (TestNetHTTPParkContract/new)
//   - When the next request is in its buffer already (pipelining), the
//     Peek reads nothing and its next call is SetReadDeadline again (the
//     header timeout); then it serves that request, and while the handler
//     runs, a background Read (startBackgroundRead: one byte, no deadline)
//     waits on the connection. So a Read after a second SetReadDeadline is
//     never the wait for a request. (TestNetHTTPParkContract/pipelined,
//     TestParkPipelined)
//   - When that wait's Read ends with io.EOF, it writes nothing more and
//     calls Close, once, from its goroutine; Shutdown (closeIdleConns) may
//     call Close of an idle connection at any time.
//     (TestNetHTTPParkContract/eof, TestShutdownAsParking)
//   - What its buffer holds when the wait reads is what the client sent
//     after the last request: empty lines (a malformed request to it,
//     unless they follow a POST) or the start of the next request. httpfp's
//     tap, which sees every byte read, stands at rest only when each byte
//     read belongs to a whole request, empty lines after one excluded: then
//     the buffer is empty. (TestParkKeepsUnreadBytes, TestParkBlankLines)
//
// crypto/tls:
//   - A Read that times out keeps what it read of a record, and the next
//     Read goes on with it. (TestParkedRecordTail)
//   - Read returns io.EOF after a close_notify alert (TLS 1.2 and 1.3) and
//     an error after a FIN without one. (TestParkedGoodbye)
//
// The kernel and the runtime:
//   - epoll reports a socket that is readable when it is added: a request
//     that came as the connection parked. (TestParkRequestAtPark/poller)
//   - A RawConn's Read waits only for readiness that comes after it began:
//     a peek comes first. (TestParkRequestAtPark/goroutines)
//
// # Boundaries
//
// park imports the standard library and httpfp (whose tap says whether a
// connection stands at rest), never edge or another package of edge: what
// it needs of the server it serves is the Host interface. It does not log.
package park
