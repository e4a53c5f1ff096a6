// Package static serves the files of a directory: the handler behind a
// site's or route's `root:` in edge, for sites with no application server.
//
// It implements what a front proxy's file server is expected to do:
//
//   - GET and HEAD only (RFC 9110, section 9.3.1 and 9.3.2); any other method
//     is answered 405 with an Allow header (section 15.5.6).
//   - Index files for directories; a directory named without its trailing
//     slash is redirected to the name with one, so relative links resolve.
//   - Content-Type by extension, sniffed (net/http.DetectContentType) when the
//     extension is unknown; text types carry charset=utf-8.
//   - A strong ETag from the file's size and modification time, Last-Modified,
//     and the conditional requests of RFC 9110, section 13 (If-Match,
//     If-None-Match, If-Modified-Since, If-Unmodified-Since, If-Range).
//   - Range requests (RFC 9110, section 14): single and multiple ranges
//     (multipart/byteranges), 416 for unsatisfiable ones. Conditionals and
//     ranges are net/http.ServeContent's, with two bounds first: a request
//     for more than Config.MaxRanges ranges (DefaultMaxRanges, 100) gets the
//     whole file (200, as Apache's MaxRanges), and ranges that overlap or
//     touch are merged (RFC 9110, section 14.6), so that no response holds
//     a byte twice or more parts than the limit. LimitRanges applies the
//     same bounds to a request for a representation of unknown size, such
//     as one a proxy forwards.
//   - Precompressed siblings (name.zst, name.br, name.gz) chosen by the
//     request's Accept-Encoding with its q-values (RFC 9110, section 12.5.3),
//     sent with Content-Encoding, Vary: Accept-Encoding and the Content-Type of
//     the original. Ranges then apply to the encoded bytes, as in nginx's
//     gzip_static.
//   - No way out of the root: "..", "." and empty segments, backslashes,
//     paths that are not UTF-8 and dotfiles (except a top-level .well-known,
//     RFC 8615) are 404, a NUL byte is 400, and every file is opened through an os.Root, which refuses
//     symbolic links that lead outside the root (403).
//   - An HTML directory listing, only when Config.Listing is set.
//
// Error responses carry the status text only, never a path or an error
// message from the file system; or, for the statuses of Config.ErrorPages,
// the content of a file under the root with the same status (nginx's
// error_page, Caddy's handle_errors).
//
// # Paths and prefixes
//
// The handler looks r.URL.Path up under Config.Root, as nginx's root does:
// a route "/docs/" with root "/srv/site" serves "/docs/a.html" from
// "/srv/site/docs/a.html". With Config.StripPrefix "/docs/" it takes the
// prefix off first, as nginx's alias does: root "/srv/docs" serves
// "/docs/a.html" from "/srv/docs/a.html", and a path outside the prefix is
// 404. A caller may also strip the prefix itself (http.StripPrefix) and
// leave StripPrefix empty; a leading slash is then optional. A directory
// named without its trailing slash, the route's own ("/docs") included, is
// redirected to the name with one by a Location relative to the last
// segment ("docs/"), so that the prefix is kept whoever stripped it and
// relative links in the index resolve.
package static
