// Package compress is HTTP response compression for the edge: a middleware
// that encodes a response with zstd (RFC 8878), brotli (RFC 7932) or gzip
// (RFC 1952) when the client asks for it.
//
// The content coding is negotiated from Accept-Encoding as RFC 9110, section
// 12.5.3 says: q-values in thousandths, q=0 refuses a coding, "*" stands for
// every coding not named, "x-gzip" is gzip (section 8.4.1.3), and an explicit
// "identity" preferred over every offered coding keeps the response as it
// is. Ties go to the server's order of preference (Config.Encodings).
//
// A response is compressed only when all of these hold:
//   - the request is not HEAD;
//   - the status is 2xx other than 204, 205 and 206, or 3xx other than 304,
//     or an error (4xx, 5xx); 1xx informational responses pass through and
//     101 Switching Protocols is never touched;
//   - the response has no Content-Encoding and its Cache-Control has no
//     no-transform (RFC 9111, section 5.2.2.6);
//   - its Content-Type (sniffed with http.DetectContentType when the handler
//     set none) is one of Config.Types;
//   - its Content-Length, or the bytes written before the handler returned,
//     reach Config.MinSize, or the handler flushed before that (a stream).
//
// The decision is taken once, on the first Write that reaches MinSize, on a
// Flush, on a WriteHeader whose headers already decide it, or when the
// handler returns; until then at most MinSize bytes are held back. A
// compressed response loses Content-Length and Accept-Ranges, gains
// Content-Encoding, and its strong ETag becomes weak (W/"…"), since the bytes
// differ from the ones it names. Every response whose type could be
// compressed gets "Vary: Accept-Encoding" added to its Vary.
//
// Flush pushes what the encoder holds and then flushes the connection, so
// server-sent events and other streams arrive as they are written. Note that
// httputil.ReverseProxy flushes after every write when the upstream sent no
// Content-Length, so behind it such responses count as streams and are
// compressed whatever their size; responses with a Content-Length are
// judged by it. The
// wrapped http.ResponseWriter has an Unwrap method, so that
// http.ResponseController reaches the connection's own Hijack,
// SetReadDeadline and SetWriteDeadline (websockets through
// httputil.ReverseProxy keep working).
//
// Encoders come from github.com/klauspost/compress (zstd, gzip) and
// github.com/andybalholm/brotli, and are reused through a sync.Pool per
// Compressor. The zstd encoder runs synchronously (no goroutines) with a
// 128 KiB window, and brotli with the same window behind a 16 KiB input
// buffer (it is slow on small writes), to keep the memory of many concurrent
// streams small.
package compress
