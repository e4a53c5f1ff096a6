// Package accept negotiates content codings from a request's
// Accept-Encoding field, as RFC 9110, section 12.5.3, describes: q-values
// (section 12.4.2), "*", "identity" and the "x-gzip" alias. It is the one
// reading of the field that response compression, precompressed static
// files and the edge's own pages share.
package accept
