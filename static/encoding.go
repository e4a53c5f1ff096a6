package static

import (
	"net/http"
	"strconv"
	"strings"
)

// An encoding is a content coding we can serve from a precompressed sibling.
type encoding struct {
	token string // Content-Encoding value
	ext   string // suffix of the sibling file
}

// encodings are the codings served, in our order of preference when the
// client weighs several equally.
var encodings = [...]encoding{
	{"zstd", ".zst"},
	{"br", ".br"},
	{"gzip", ".gz"},
}

// acceptedEncodings returns the indexes into encodings that the request
// accepts (q > 0), best first: by the client's q-value, then by our order.
// Per RFC 9110, section 12.5.3, "*" matches any coding not named, and
// "x-gzip" is gzip.
func acceptedEncodings(h http.Header) (order [len(encodings)]int, n int) {
	var q [len(encodings)]float64
	var named [len(encodings)]bool
	star := -1.0
	for _, line := range h.Values("Accept-Encoding") {
		for line != "" {
			var item string
			item, line, _ = strings.Cut(line, ",")
			token, params, _ := strings.Cut(item, ";")
			token = strings.TrimSpace(token)
			w := qValue(params)
			if token == "*" {
				star = w
				continue
			}
			if strings.EqualFold(token, "x-gzip") {
				token = "gzip"
			}
			for i, e := range encodings {
				if strings.EqualFold(token, e.token) {
					q[i], named[i] = w, true
				}
			}
		}
	}
	for i := range encodings {
		if !named[i] && star >= 0 {
			q[i] = star
		}
		if q[i] <= 0 {
			continue
		}
		// Insert by descending q; equal q keeps our order.
		j := n
		for j > 0 && q[order[j-1]] < q[i] {
			order[j] = order[j-1]
			j--
		}
		order[j] = i
		n++
	}
	return order, n
}

// qValue returns the weight in an Accept-Encoding item's parameters: 1 when
// absent, 0 when malformed (a malformed weight is not a reason to send a
// coding the client may not understand).
func qValue(params string) float64 {
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		k, v, _ := strings.Cut(p, "=")
		if !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 || f > 1 {
			return 0
		}
		return f
	}
	return 1
}
