// Package drain holds what a server's Shutdown waits for and closes beyond
// the connections net/http and quic-go track for it: the requests being
// served (Gate), and the websockets whose client connections a protocol
// switch took out of net/http's hands (Tunnel), which net/http's Shutdown
// neither waits for nor closes.
//
// A Gate counts requests in and out, shuts, and waits until the last one
// has left. An UpgradeWriter wraps the ResponseWriter of a request that
// asks for a protocol switch: whoever hijacks the connection through it
// gets a Tunnel, handed to a Tracker (the server) until the request's
// handler returns. At shutdown, Tunnel.GoingAway closes the websocket as
// RFC 6455 wants it closed, between frames, with status 1001 (going away,
// section 7.4.1) both ways.
//
// drain imports no package of this module: it needs nothing of the server
// but its Tracker.
package drain
