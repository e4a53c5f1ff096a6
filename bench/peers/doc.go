// Command peers measures the edge against nginx and Caddy on this machine,
// in one run: the budget of DESIGN.md ("Performance budgets") is a ratio
// to peers measured side by side, never an absolute figure from another
// day or another box.
//
// It starts, on loopback, one upstream (nginx serving a 1 KiB file) and
// three TLS fronts proxying to it with the same certificate: nginx
// (Debian's), Caddy (reverse_proxy, built from the pinned module in
// bench/peers/caddy) and the edge (built from this tree: the default
// policy, the fingerprint log on, as users run it); with -floor, also
// gofloor (bench/peers/gofloor), net/http's server doing the least a proxy
// does with nothing of its own, the floor of any front built on net/http,
// which shows what of the edge's cost is its own work. Then, in rounds whose
// order of fronts rotates so that the machine's drift cancels:
//
//   - HTTP/1.1 load with wrk (-t2 -c32) and HTTP/2 load with h2load (-c16
//     -m10), each for -duration; the front's CPU time over the run comes
//     from /proc/<pid>/stat (utime+stime of the process and its children
//     for nginx's workers), divided by the requests answered;
//   - new TLS connections per second (a full handshake, and one resumed
//     with a session ticket), each carrying one request, from a Go client
//     in this process, with the front's CPU per connection;
//
// and once per front, -idle connections held open after one request each
// (HTTP/1.1, then HTTP/2), with the growth of the front's resident memory
// divided by their number. Clients connect from several 127.0.0.0/8
// source addresses so that the edge's per-client connection cap (256 by
// default) stays as users run it.
//
// It prints medians over the rounds with their range, and the edge's
// ratios to Caddy and nginx, with the load average before and after: on a
// shared machine a figure measured under load says so.
//
// Usage (make bench-peers builds the binaries first):
//
//	go run ./bench/peers -edge bin/edge -caddy bin/caddy [-floor bin/gofloor] [-rounds 3] [-duration 5s] [-idle 5000]
package main
