package edge

import (
	"fmt"
	"net/http"
)

// Reasons the edge answers a request itself with an error instead of
// passing it on. Each is the fingerprint log line's reason (a contract:
// DESIGN.md, fingerprint log), the reason label of the client, upstream
// and limit metrics, and the reason named on the page the client gets.
// One cause, one constant: a new cause adds its constant here and its line
// to reasonTexts (TestReasons checks both, and that docs/fingerprints.md
// lists it).
const (
	// Before the site: the request itself.
	reasonBadForwardedFor   = "bad_forwarded_for"   // 400: a trusted proxy named the client with garbage
	reasonRequestsPerClient = "requests_per_client" // 429: limits.requests_per_client in flight
	reasonMethodNotAllowed  = "method_not_allowed"  // 405: TRACE, TRACK, CONNECT
	reasonAmbiguousLength   = "ambiguous_length"    // 400: Transfer-Encoding and Content-Length
	reasonBadPath           = "bad_path"            // 400: a path that cannot be normalized
	reasonBadPathUTF8       = "bad_path_utf8"       // 400: a path not UTF-8 once decoded
	reasonAmbiguousPath     = "ambiguous_path"      // 400: a path servers read as different places
	reasonUnknownSite       = "unknown_site"        // 421: a host no site serves (also on port 80)
	reasonBadHost           = "bad_host"            // 400: port 80, a host that makes no URL
	reasonPlainHTTP         = "plain_http"          // 400: plain HTTP on the TLS port, not GET or HEAD
	reasonEarlyRefusal      = "early_refusal"       // no answer: refused at the ClientHello (limits.refuse_early)

	// After the policy: basic authentication, the body, the upstream.
	reasonAuthAttempts   = "auth_attempts"    // 429: failed basic-auth attempts of the client
	reasonAuthBusy       = "auth_busy"        // 503: every bcrypt slot busy
	reasonBodyTooLarge   = "body_too_large"   // 413: past the site's max_body_bytes
	reasonBodyTooSlow    = "body_too_slow"    // 408: below the minimum body rate
	reasonBadRequestBody = "bad_request_body" // 400: a body that does not decode (chunking)
	reasonClientGone     = "client_gone"      // 499: the client left before the answer

	// Not an error: the policy's challenge, let through by challenge.when.
	reasonChallengeCalm = "challenge_off_calm" // ALLOW: challenge.when is false (the site is calm)

	reasonUpstreamError       = "upstream_error"       // 502
	reasonUpstreamUnreachable = "upstream_unreachable" // 502: no connection
	reasonUpstreamBusy        = "upstream_busy"        // 503: no connection slot within the queue time
	reasonUpstreamStreams     = "upstream_streams"     // 503: no stream slot
	reasonUpstreamQueueShare  = "upstream_queue_share" // 503: the client cluster's share of the line is full
	reasonUpstreamTimeout     = "upstream_timeout"     // 504
)

// reasonTexts says, for each reason, what the plain error page tells the
// client. It is a read-only table.
var reasonTexts = map[string]string{
	reasonBadForwardedFor:   "A proxy in front of this server named the client with an X-Forwarded-For value that is not an address.",
	reasonRequestsPerClient: "Too many requests from your address are in progress at once.",
	reasonMethodNotAllowed:  "This server does not take requests of that method.",
	reasonAmbiguousLength:   "The request says its body's length two ways (Transfer-Encoding and Content-Length): it is refused, as it could be read two ways.",
	reasonBadPath:           "The request's path cannot be read: it leaves the site's root or is not encoded correctly.",
	reasonBadPathUTF8:       "The request's path is not UTF-8 once decoded (or uses an overlong form of a character).",
	reasonAmbiguousPath:     "The request's path means different places to different servers (a segment some read as \"..\", or escapes within escapes).",
	reasonUnknownSite:       "This server does not serve that host name.",
	reasonBadHost:           "The request's host name cannot be part of a URL.",
	reasonPlainHTTP:         "This port speaks HTTPS, not plain HTTP. Use an https:// URL.",
	reasonEarlyRefusal:      "The connection was refused: this client is not allowed on this site.",

	reasonAuthAttempts:   "Too many password attempts from your address. Wait a minute.",
	reasonAuthBusy:       "The server is busy checking passwords. Try again in a moment.",
	reasonBodyTooLarge:   "The request's body is larger than this site accepts.",
	reasonBodyTooSlow:    "The request's body arrived too slowly.",
	reasonBadRequestBody: "The request's body could not be read: it is not encoded correctly.",
	reasonClientGone:     "The client went away before the answer.",

	reasonChallengeCalm: "The request was let through without a challenge: the site is calm.",

	reasonUpstreamError:       "The site's server failed to answer.",
	reasonUpstreamUnreachable: "The site's server cannot be reached.",
	reasonUpstreamBusy:        "The site's server is busy.",
	reasonUpstreamStreams:     "The site's server is busy.",
	reasonUpstreamQueueShare:  "The site's server is busy, and many requests like yours are waiting for it.",
	reasonUpstreamTimeout:     "The site's server took too long to answer.",
}

// plainText explains a reason plainError answers with.
func plainText(reason string) string {
	if t, ok := reasonTexts[reason]; ok {
		return t
	}
	return "The request was refused."
}

// plainBody is the text of a plain error page: the status, what reason
// means, reason itself and the request's ID.
func plainBody(status int, reason, id string) string {
	return fmt.Sprintf("%d %s\n\n%s\nreason: %s\nrequest id: %s\n", status, http.StatusText(status), plainText(reason), reason, id)
}
