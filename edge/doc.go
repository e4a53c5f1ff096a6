// Package edge composes Maat's leaves into the edge proxy of DESIGN.md. It
// reads in three layers:
//
//   - Config: the YAML configuration file, in package edge/config (Load,
//     Parse, Validate), every key with its default (Default). A Config is
//     validated once, where it is loaded; New, NewHandler and Reload take
//     it as valid.
//   - Handler: the request path, an immutable http.Handler built from one
//     configuration snapshot by NewHandler: request hygiene, the site and its
//     route, the bot policy, challenges and pass cookies, the upstream proxy
//     and the fingerprint log line. What outlives a snapshot (the store, the
//     secret, the log writers, the logger, metrics) is given to it in an Env.
//     It is testable with httptest alone.
//   - Server: the connections. It binds the listeners (TCP with TLS for
//     HTTP/1.1 and HTTP/2, UDP for HTTP/3, port 80, the admin port), runs the
//     TLS handshake with its fingerprint, tracks every connection and every
//     goroutine it starts, swaps in a new Handler on Reload and drains on
//     Shutdown.
//
// cmd/edge is a thin command line over this package. Its offline tools
// (policy check and explain, robots2policy, fp top, config check, the demo
// application, the local CA, password hashes) are cmd/edge/internal/ops,
// which imports edge and never the other way round. offline.go holds what
// edge exports for those tools alone: the steps New takes with a
// configuration, each on its own, for `edge config check` to take without
// listening or writing.
package edge
