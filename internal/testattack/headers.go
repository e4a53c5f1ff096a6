package testattack

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2/hpack"
)

// bigHeaders sends p.HeaderRequests HTTP/2 requests whose header list is
// p.H2HeaderBytes long once HPACK-encoded (fields never indexed, so every
// request carries all of it, in HEADERS and CONTINUATION frames), and as
// many HTTP/1.1 requests with one header field of p.H1HeaderBytes.
func bigHeaders(ctx context.Context, t Target, p Params, out *Outcome) error {
	fields, size := bigHeaderList(p.H2HeaderBytes)
	var c *h2Conn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	id := uint32(1)
	for i := range p.HeaderRequests {
		if c == nil || !c.alive() || c.goingAway() {
			if c != nil {
				c.tally(&out.Answers, "h2: ")
				c.Close()
			}
			var err error
			if c, err = t.dialH2(ctx, source(blockHeaders, 0), false); err != nil {
				return err
			}
			id = 1
		}
		if c.request(id, t.Host, "GET", fmt.Sprintf("/hdr2/%d", i), fields, true, true) == nil {
			c.waitEnded(ctx, 10*time.Second)
		}
		id += 2
	}
	if c != nil {
		c.tally(&out.Answers, "h2: ")
	}
	value := strings.Repeat("a", p.H1HeaderBytes)
	var wg sync.WaitGroup
	for i := range p.HeaderRequests {
		wg.Go(func() { out.Answers.Add("h1: "+h1BigHeader(ctx, t, i, value), 1) })
	}
	wg.Wait()
	out.Held = 2 * p.HeaderRequests
	out.Note("HTTP/2 header list %.1f KB encoded, %.1f KB decoded; the upstream's largest request head %.1f KB",
		float64(size)/1e3, float64(decodedSize(fields))/1e3, float64(t.Upstream.Stats().MaxHeadBytes)/1e3)
	return nil
}

// bigHeaderList returns never-indexed fields whose HPACK encoding is at
// least n bytes long, and that length.
func bigHeaderList(n int) ([]hpack.HeaderField, int) {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	// Characters with long Huffman codes, so that the encoder sends them as
	// they are.
	const alphabet = "!\"#$%&'()*+,;<=>?@[\\]^`{|}~ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	value := make([]byte, 1000)
	for i := range value {
		value[i] = alphabet[(i*7)%len(alphabet)]
	}
	var fields []hpack.HeaderField
	for buf.Len() < n {
		f := hpack.HeaderField{Name: fmt.Sprintf("x-big-%04d", len(fields)), Value: string(value), Sensitive: true}
		_ = enc.WriteField(f)
		fields = append(fields, f)
	}
	return fields, buf.Len()
}

func decodedSize(fields []hpack.HeaderField) int {
	n := 0
	for _, f := range fields {
		n += len(f.Name) + len(f.Value)
	}
	return n
}

// h1BigHeader sends one HTTP/1.1 request with a header field of value and
// returns what the edge answered.
func h1BigHeader(ctx context.Context, t Target, i int, value string) string {
	c, err := t.dialTLS(ctx, source(blockHeaders, 1), "http/1.1")
	if err != nil {
		return "dial: " + errKind(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	w := bufio.NewWriter(c)
	_, _ = fmt.Fprintf(w, "GET /hdr1/%d HTTP/1.1\r\nHost: %s\r\nUser-Agent: Go-http-client/1.1\r\nX-Big: %s\r\nConnection: close\r\n\r\n", i, t.Host, value)
	if err := w.Flush(); err != nil {
		return errKind(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return errKind(err)
	}
	res.Body.Close()
	return strconv.Itoa(res.StatusCode)
}
