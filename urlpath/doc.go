// Package urlpath reads a request's path the two ways an edge proxy needs:
// the normal form it forwards (RFC 3986), and the model: the place the most
// lenient common upstream takes the path for, on which every rule that
// guards a place (a route with a password, a redirect, a policy rule on the
// path, a static root) must decide. An upstream that reads "/ADMIN/",
// "/admin;x/" or "/admin./" as "/admin/" serves what a rule on "/admin/"
// guards; the model is "/admin/" for all three, so the rule holds.
//
// # The normal form
//
// [Normalize] returns what is forwarded; it is RFC 3986's normal form:
// percent-encoded unreserved characters decoded (section 2.3), other
// escapes kept with upper-case hex (section 6.2.2.1), dot segments removed
// (section 5.2.4), repeated slashes merged. A path that does not start
// with "/", holds a bad escape, a backslash or a control character, or whose
// encoded slashes ("%2F") would decode into an empty or dot segment, has
// none.
//
// # The model
//
// [Model] reads the normal form further, each rule as the upstream named
// beside it reads paths (the union of them: the most lenient reading):
//
//   - Every escape is decoded, "%2F" too (PHP frameworks route on
//     rawurldecode(REQUEST_URI); Apache with AllowEncodedSlashes; Tomcat
//     with ALLOW_ENCODED_SLASH). Decoding repeats while escapes remain, at
//     most three times (an application that decodes a decoded path again;
//     IIS's double decoding, CVE-2001-0333). Deeper nesting is
//     [ErrAmbiguous]. MediaWiki refuses titles holding "%" and two hex
//     digits for the same reason.
//   - Fullwidth forms of ASCII (U+FF01 to U+FF5E but U+FF05, the percent
//     sign) and the ideographic space (U+3000) are read as the ASCII
//     characters (Windows' best-fit code page conversion, met by
//     applications on IIS that use the ANSI file APIs; NFKC normalization).
//     The fullwidth percent sign is left: it would turn text into escapes.
//   - A backslash separates segments, as a slash does (IIS and every
//     Windows file API).
//   - A segment's ";" and everything after it are path parameters and are
//     removed: Tomcat, Jetty and Spring strip them before they resolve dot
//     segments, so "/x/..;/admin/" is "/admin/" and "/;/admin/" is
//     "/admin/" there.
//   - A segment's NTFS stream suffix (":$" and what follows, the colons
//     before it too) is removed: "admin::$INDEX_ALLOCATION" and
//     "admin:$i30:$INDEX_ALLOCATION" open the directory admin on IIS.
//   - Trailing dots and spaces of a segment are removed (Win32 path
//     normalization, IIS): "/admin./" and "/admin%20/" are "/admin/". A
//     segment left empty, or that is ".", goes (as an empty one does).
//   - A segment that those rules turn into ".." ("..;x", ".. ", "%252e%252e",
//     fullwidth full stops) is [ErrAmbiguous]: the normal form has no dot
//     segments left, so such a segment is one that lenient upstreams climb
//     and strict ones (nginx, Caddy, Go, Node) take as a name. Refusing it
//     keeps every reading's segments in one line, so that a path the strict
//     reading puts under a prefix the model puts there too.
//   - Repeated slashes are merged.
//
// Case is left alone: [Fold] maps a model (or a prefix) to one case, rune
// by rune (Windows and IIS, NTFS; macOS's case-insensitive APFS and HFS+;
// Tomcat and any static server on such a disk), and [HasPrefix], [CutPrefix]
// and [Equal] compare with or without it.
//
// After decoding, the model refuses what no upstream agrees on: invalid
// UTF-8 ([ErrUTF8]; the bytes of Latin-1 escapes such as "%E9" are refused
// too), overlong UTF-8 ([ErrOverlong]: "%c0%af" is "/" to decoders that
// accept it, IIS 4 and 5, CVE-2000-0884) and control characters
// ([ErrControl]), at every decoding depth.
//
// The model is a decoded path: it starts with "/", has no dot and no empty
// segment, and ends in "/" when the path does. Spelled again as an escaped
// path (net/url's URL.EscapedPath), its model is itself.
//
// Not modelled: Unicode normalization other than the fullwidth forms (NFC
// against NFD on macOS), 8.3 short names (ADMINI~1), "%u" escapes (a bad
// escape: refused), and upstreams that cut a decoded path at "?" or "#".
//
// The package imports no package of this module and does not log.
package urlpath
