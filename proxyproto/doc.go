// Package proxyproto reads the PROXY protocol header that an L4 balancer
// (HAProxy's send-proxy and send-proxy-v2, AWS Network Load Balancer, nginx
// stream, Envoy) puts in front of each connection it relays, and makes the
// connection report the client's addresses the header carries.
//
// Specifications:
//   - HAProxy, "The PROXY protocol, Versions 1 & 2" (doc/proxy-protocol.txt
//     in HAProxy's sources): the text header (§2.1), the binary header
//     (§2.2) and its TLVs (§2.2.1–§2.2.8).
//   - RFC 4960 Appendix B: the CRC32c checksum of the PP2_TYPE_CRC32C TLV.
//
// Binary headers are parsed with golang.org/x/crypto/cryptobyte, one chain
// per structure. Every header has one size bound: 107 bytes for version 1
// (the specification's), Config.MaxV2Bytes for version 2 (4 KiB unless set,
// at most the protocol's 16+65535). The [Conn] reads a header exactly: the
// 16-byte version 2 prefix and then the length it announces, a version 1
// line in reads no longer than the shortest valid rest of the line; so the
// bytes after the header, a TLS ClientHello most often, reach the next
// reader unchanged, with no copy and no buffer kept.
//
// Choices where the specification leaves room, or where we are stricter:
//   - A LOCAL header (a balancer's health check), AF_UNSPEC, AF_UNIX and a
//     version 1 UNKNOWN keep the socket's addresses. AF_UNIX paths are
//     parsed into the [Header] all the same; a LOCAL header's addresses too.
//   - Only the protocol bytes the specification lists are accepted (0x00,
//     0x11, 0x12, 0x21, 0x22, 0x31, 0x32); other combinations have no
//     defined address block.
//   - A CRC32C TLV is verified and must be 4 bytes and single; a UNIQUE_ID
//     is at most 128 bytes (as HAProxy checks it). Other TLVs are kept as
//     they are, in wire order; [ParseSSL] reads an SSL TLV.
//   - IPv4-mapped IPv6 addresses are unmapped, so that one client has one
//     address whichever family the balancer used.
//   - A header is never guessed (§5: receivers must rely on configuration):
//     a listener expects it on every connection, or on those from
//     Config.Trusted, and passes the others through unread.
//
// The package never logs: a header that cannot be read is reported through
// [Config.OnError], [Conn.Header] and every Read.
package proxyproto
