package static

import (
	"net/http"

	"github.com/maatproxy/maat/accept"
)

// An encoding is a content coding we can serve from a precompressed sibling.
type encoding struct {
	token string // Content-Encoding value
	ext   string // suffix of the sibling file
}

// encodings are the codings served, in our order of preference when the
// client weighs several equally; codingNames lists their tokens in the same
// order, as accept.Rank takes them.
var (
	encodings   = [...]encoding{{accept.Zstd, ".zst"}, {accept.Brotli, ".br"}, {accept.Gzip, ".gz"}}
	codingNames = []string{accept.Zstd, accept.Brotli, accept.Gzip}
)

// acceptedEncodings returns the indexes into encodings that the request
// accepts, best first (accept.Rank: by the client's q-value, then by our
// order).
func acceptedEncodings(h http.Header) (order [len(encodings)]int, n int) {
	return order, len(accept.Rank(h["Accept-Encoding"], codingNames, order[:0]))
}
