// Package console is the operator's page on the admin listener: what the
// edge decided over the last minutes, who asked (JA4 fingerprints, client
// families, autonomous systems, clients), which rules fired, how the
// challenges went, and how busy each upstream is.
//
// A Recorder counts the requests the edge hands it into fixed time
// buckets (Buckets of Step) and into top-K tables of bounded size (the
// space-saving algorithm of Metwally, Agrawal and El Abbadi, 2005); Record
// takes a lock and allocates nothing, so it sits on the request path. A
// Page renders a Snapshot as server-side HTML with inline SVG plots and no
// external asset, under a Content-Security-Policy whose only allowances
// are the page's nonce'd style and its one-line reload script.
//
// Client addresses are shown only as the fingerprint log writes them
// (log.client_ip: full, prefix, hash or none; fplog.FormatAddr): a page
// never shows an address the log would hide.
//
// console imports fplog (the actions and the address modes) and no other
// package of this module; the upstreams' state comes through the
// Upstreams interface the edge implements.
package console
