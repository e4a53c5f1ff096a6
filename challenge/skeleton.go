package challenge

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
)

// A page skeleton is the embedded template rendered once per language and
// page kind with markers in place of the per-request fields (token, nonce,
// request ID, …); a request then costs a few string copies instead of an
// html/template execution, so that a page under flood costs about what a
// handler serving fixed bytes does. A skeleton is used only when rendering
// it with probe values that need escaping gives byte for byte what the
// template gives, and never for an operator's templates.

// slot names a per-request field of a page.
type slot uint8

const (
	slotNonce slot = iota
	slotRequestID
	slotReason
	slotText
	slotRefresh
	slotSeed
	slotK
	slotSubBits
	slotPassURL
	slotWaitURL
	slotBackURL
	slotWaitText
	slotWaitMS
	slotCapMS
	numSlots
)

// field returns the page's field for s.
func (d *pageData) field(s slot) *string {
	switch s {
	case slotNonce:
		return &d.Nonce
	case slotRequestID:
		return &d.RequestID
	case slotReason:
		return &d.Reason
	case slotText:
		return &d.Text
	case slotRefresh:
		return &d.NoScriptRefresh
	case slotBackURL:
		return &d.BackURL
	}
	if d.Challenge == nil {
		return nil
	}
	ch := d.Challenge
	switch s {
	case slotSeed:
		return &ch.Seed
	case slotK:
		return &ch.K
	case slotSubBits:
		return &ch.SubBits
	case slotPassURL:
		return &ch.PassURL
	case slotWaitURL:
		return &ch.WaitURL
	case slotWaitText:
		return &ch.WaitText
	case slotWaitMS:
		return &ch.WaitMS
	case slotCapMS:
		return &ch.CapMS
	}
	return nil
}

// urlSlot reports whether s holds a URL that the template writes into a
// URL attribute (href), where html/template normalizes it; the page
// builders normalize those fields themselves (normalizeURL).
func urlSlot(s slot) bool {
	switch s {
	case slotPassURL, slotWaitURL, slotBackURL:
		return true
	}
	return false
}

// skeletonKey is everything about a page that is not a slot.
type skeletonKey struct {
	lang, title           string
	status                int
	retry, challenge, pow bool
	present               [numSlots]bool // which slots are non-empty (templates test them)
}

type skeleton struct {
	chunks []string // len(slots)+1
	slots  []slot
	gz     [][]byte // each chunk compressed on its own (see appendGzip)
}

// write writes the page to buf and appends the start and end of each field
// in buf to fields.
func (sk *skeleton) write(buf *bytes.Buffer, d *pageData, esc *strings.Replacer, fields []int) []int {
	for i, s := range sk.slots {
		buf.WriteString(sk.chunks[i])
		start := buf.Len()
		esc.WriteString(buf, *d.field(s))
		fields = append(fields, start, buf.Len())
	}
	buf.WriteString(sk.chunks[len(sk.chunks)-1])
	return fields
}

const markPrefix, markSuffix = "zqMAATSLOT", "qz"

var markRE = regexp.MustCompile(markPrefix + `(\d+)` + markSuffix)

// newEscaper mirrors html/template's escaping of a string in HTML text and
// quoted attributes (html/template's htmlEscaper).
func newEscaper() *strings.Replacer {
	return strings.NewReplacer("\x00", "\uFFFD", `"`, "&#34;", "&", "&amp;", "'", "&#39;", "+", "&#43;", "<", "&lt;", ">", "&gt;")
}

func keyOf(d *pageData) skeletonKey {
	k := skeletonKey{lang: d.Lang, title: d.Title, status: d.Status, retry: d.Retry, challenge: d.Challenge != nil}
	if d.Challenge != nil {
		k.pow = d.Challenge.PoW
	}
	for s := range numSlots {
		if f := d.field(s); f != nil && *f != "" {
			k.present[s] = true
		}
	}
	return k
}

// skeleton returns the skeleton for d's kind of page, building it on first
// use, or nil when the page must go through the template.
func (c *Challenger) skeleton(d *pageData) *skeleton {
	if c.customTemplates {
		return nil
	}
	k := keyOf(d)
	if v, ok := c.skeletons.Load(k); ok {
		return v.(*skeleton)
	}
	if n := c.skeletonCount.Add(1); n > maxSkeletons {
		return nil // a page kind per status code at most; never grow unbounded
	}
	sk := c.buildSkeleton(d, k)
	c.skeletons.Store(k, sk)
	return sk
}

const maxSkeletons = 4096

func (c *Challenger) buildSkeleton(d *pageData, k skeletonKey) *skeleton {
	fill := func(value func(slot) string) *pageData {
		cp := *d
		if d.Challenge != nil {
			ch := *d.Challenge
			cp.Challenge = &ch
		}
		for s := range numSlots {
			if f := cp.field(s); f != nil && k.present[s] {
				*f = value(s)
			}
		}
		return &cp
	}
	var out bytes.Buffer
	marked := fill(func(s slot) string { return markPrefix + strconv.Itoa(int(s)) + markSuffix })
	if err := c.tmpl.ExecuteTemplate(&out, "page", marked); err != nil {
		return nil
	}
	page := out.String()
	sk := &skeleton{}
	last := 0
	for _, m := range markRE.FindAllStringSubmatchIndex(page, -1) {
		n, _ := strconv.Atoi(page[m[2]:m[3]])
		if n >= int(numSlots) {
			return nil
		}
		sk.chunks = append(sk.chunks, page[last:m[0]])
		sk.slots = append(sk.slots, slot(n))
		last = m[1]
	}
	sk.chunks = append(sk.chunks, page[last:])

	// Prove the escaping equal with values that need it (URLs as the page
	// builders hand them over: normalized).
	probe := fill(func(s slot) string {
		v := `<b title="x">&'+é` + "\x00" + strconv.Itoa(int(s)) + " /a?b=c&d=%2F"
		if urlSlot(s) {
			v = normalizeURL("/" + v)
		}
		return v
	})
	var want, got bytes.Buffer
	if err := c.tmpl.ExecuteTemplate(&want, "page", probe); err != nil {
		return nil
	}
	sk.write(&got, probe, c.escaper, nil)
	if !bytes.Equal(want.Bytes(), got.Bytes()) {
		return nil
	}
	var err error
	if sk.gz, err = compressChunks(sk.chunks); err != nil {
		return nil
	}
	return sk
}
