package console

import (
	"bytes"
	"cmp"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/maatproxy/maat/fplog"
)

// UpstreamRow is the state of one upstream address of a site at a moment.
type UpstreamRow struct {
	Site, Upstream string
	Pressure       float64 // 0–1: how saturated the address is
	InUse          int     // connection slots held
	Capacity       int     // connection slots (limits.upstream_conns)
	Queue          int     // requests waiting for a slot
}

// Upstreams reports the upstreams' state; the edge implements it.
type Upstreams interface {
	UpstreamStats() []UpstreamRow
}

// Page serves the console: an HTML page that reloads itself, without
// external assets, under a Content-Security-Policy that allows only its
// own nonce'd style and script.
type Page struct {
	Recorder *Recorder
	// Upstreams, if not nil, reports the upstreams' pressure and queue.
	Upstreams Upstreams
	// Privacy returns how client addresses are shown: the fingerprint
	// log's log.client_ip mode (fplog.ClientIPFull, …) and the key of
	// fplog.ClientIPHash. If nil, or with fplog.ClientIPNone, no address
	// is shown.
	Privacy func() (mode string, key []byte)
	// Now is the clock. If nil, time.Now.
	Now func() time.Time
	// Refresh is the time between reloads. If zero, DefaultRefresh.
	Refresh time.Duration
}

// DefaultRefresh is the time between reloads of the page.
const DefaultRefresh = Step

//go:embed page.html
var pageHTML string

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"pct": func(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) + " %" },
	"num": formatCount,
}).Parse(pageHTML))

// view is what the template renders.
type view struct {
	Nonce        string
	Refresh      int // milliseconds; 0 = paused
	Updated      string
	Minutes      int
	TableMinutes int
	Totals       Counts
	Total        uint64
	Decided      uint64
	Undecided    uint64
	Issued       uint64
	Solved       uint64
	Failed       uint64
	Series       []series
	Decisions    plot
	Chals        plot
	Tables       []table
	Clients      *table
	Privacy      string // the mode, when clients are hidden or reduced
	Upstreams    []UpstreamRow
	HasUp        bool
}

type series struct {
	Class, Name string
	Count       uint64
}

// plot is an SVG chart: bars and lines in a viewBox of W×H.
type plot struct {
	ID, Title, Desc string
	W, H            int
	Top, Bottom     int // the plot area's y range
	Left, Right     int
	Max             uint64
	Half            uint64
	HalfY           int
	Bars            []rect
	Lines           []line
	Ticks           []tick
}

type rect struct {
	X, Y, W, H int
	Class      string
}

type line struct {
	Class, Points string
}

type tick struct {
	X     int
	Label string
}

type table struct {
	ID, Caption, Key string
	Rows             []tableRow
	Empty            string
}

type tableRow struct {
	Key                                 string
	Count, Allowed, Challenged, Refused uint64
}

// Names of the decisions as the page says them, and their CSS classes.
var (
	decisionNames   = [NDecisions]string{"allowed", "passed (cookie)", "challenged", "denied", "rate-limited", "diverted"}
	decisionClasses = [NDecisions]string{"allow", "pass", "challenge", "deny", "rate", "divert"}
)

func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	if p.Now != nil {
		now = p.Now()
	}
	snap := p.Recorder.Snapshot(now, Rows)
	v := &view{Nonce: nonce(), Updated: now.UTC().Format("2006-01-02 15:04:05 UTC"), Minutes: int(Window / time.Minute),
		TableMinutes: int(generation / time.Minute)}
	if r.URL.Query().Get("pause") == "" {
		v.Refresh = int(cmp.Or(p.Refresh, DefaultRefresh) / time.Millisecond)
	}
	v.fill(snap)
	mode := fplog.ClientIPNone
	var key []byte
	if p.Privacy != nil {
		mode, key = p.Privacy()
	}
	v.Clients = clientTable(snap.Clients, mode, key)
	if mode != fplog.ClientIPFull {
		v.Privacy = cmp.Or(mode, fplog.ClientIPFull)
	}
	if p.Upstreams != nil {
		v.HasUp = true
		v.Upstreams = p.Upstreams.UpstreamStats()
	}
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, v); err != nil {
		http.Error(w, "console: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'nonce-"+v.Nonce+"'; script-src 'nonce-"+v.Nonce+
		"'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(b.Bytes())
}

func nonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) // base64-value characters html/template never escapes
}

// fill computes the totals, plots and tables of snap.
func (v *view) fill(s *Snapshot) {
	for _, p := range s.Points {
		for d, c := range p.Counts {
			v.Totals[d] += c
		}
		v.Issued += p.Issued
		v.Solved += p.Solved
		v.Failed += p.Failed
		v.Undecided += p.Unanswered
	}
	v.Decided = v.Totals.Total()
	v.Total = v.Decided + v.Undecided
	for d := range NDecisions {
		v.Series = append(v.Series, series{Class: decisionClasses[d], Name: decisionNames[d], Count: v.Totals[d]})
	}
	v.Decisions = decisionPlot(s.Points, v)
	v.Chals = challengePlot(s.Points, v)
	v.Tables = []table{
		rowsTable("sites", "Sites", "Site", s.Sites, func(k string) string { return cmp.Or(k, "(no site)") }),
		rowsTable("ja4", "Top JA4 fingerprints", "JA4", s.JA4, func(k string) string { return k }),
		rowsTable("families", "Client families (TLS stack)", "Family", s.Families, func(k string) string { return k }),
		rowsTable("asns", "Autonomous systems", "AS", s.ASNs, func(k ASN) string {
			return strings.TrimSpace("AS" + strconv.FormatUint(uint64(k.Number), 10) + " " + k.Org)
		}),
		rowsTable("rules", "Rules that matched", "Rule", s.Rules, func(k string) string { return k }),
	}
	v.Tables[3].Empty = "No autonomous system known (geo.asn_db unset, or no traffic yet)."
}

func rowsTable[K comparable](id, caption, key string, rows []Row[K], name func(K) string) table {
	t := table{ID: id, Caption: caption, Key: key, Empty: "No traffic yet."}
	for _, r := range rows {
		t.Rows = append(t.Rows, newTableRow(name(r.Key), &r))
	}
	return t
}

func newTableRow[K comparable](key string, r *Row[K]) tableRow {
	c := &r.Counts
	return tableRow{Key: key, Count: r.Count, Allowed: c[Allow] + c[Pass], Challenged: c[Challenge], Refused: c[Deny] + c[Rate] + c[Divert]}
}

// clientTable shows the clients as the fingerprint log writes them (mode),
// merged when the mode makes several one (prefix), or nil when the mode
// hides them.
func clientTable(rows []Row[netip.Addr], mode string, key []byte) *table {
	if mode == fplog.ClientIPNone {
		return nil
	}
	t := &table{ID: "clients", Caption: "Top clients", Key: "Client", Empty: "No traffic yet."}
	at := map[string]int{}
	for _, r := range rows {
		name := fplog.FormatAddr(mode, key, r.Key)
		if name == "" {
			continue
		}
		row := newTableRow(name, &r)
		i, ok := at[name]
		if !ok {
			at[name] = len(t.Rows)
			t.Rows = append(t.Rows, row)
			continue
		}
		o := &t.Rows[i]
		o.Count += row.Count
		o.Allowed += row.Allowed
		o.Challenged += row.Challenged
		o.Refused += row.Refused
	}
	slices.SortStableFunc(t.Rows, func(a, b tableRow) int { return cmp.Compare(b.Count, a.Count) })
	if len(t.Rows) > Rows {
		t.Rows = t.Rows[:Rows]
	}
	return t
}

// The plots' geometry, in SVG user units.
const (
	plotW      = 640
	plotH      = 200
	plotLeft   = 56
	plotRight  = plotLeft + Buckets*slotW
	plotTop    = 12
	plotBottom = 168
	slotW      = 9
	barW       = 7
)

func newPlot(id, title, desc string, max uint64) plot {
	p := plot{ID: id, Title: title, Desc: desc, W: plotW, H: plotH, Top: plotTop, Bottom: plotBottom,
		Left: plotLeft, Right: plotRight, Max: niceMax(max)}
	p.Half = p.Max / 2
	p.HalfY = p.y(p.Half)
	step := int(Window/time.Minute) / 5
	for m := 0; m <= int(Window/time.Minute); m += step {
		label := "now"
		if m < int(Window/time.Minute) {
			label = "−" + strconv.Itoa(int(Window/time.Minute)-m) + " min"
		}
		p.Ticks = append(p.Ticks, tick{X: plotLeft + m*Buckets*slotW/int(Window/time.Minute), Label: label})
	}
	return p
}

// y is the SVG y of value n; any n above zero is above the axis.
func (p *plot) y(n uint64) int {
	h := int(n * uint64(plotBottom-plotTop) / p.Max)
	if n > 0 {
		h = max(h, 1)
	}
	return plotBottom - h
}

// niceMax is the scale's top for a largest value n: 2, 3, 4, 5, 6 or 8
// times a power of ten, or a power of ten, at least n (and at least 2).
func niceMax(n uint64) uint64 {
	for m := uint64(1); ; m *= 10 {
		for _, f := range []uint64{2, 3, 4, 5, 6, 8, 10} {
			if f*m >= n && f*m >= 2 {
				return f * m
			}
		}
	}
}

func decisionPlot(pts []Point, v *view) plot {
	var most uint64
	for _, p := range pts {
		most = max(most, p.Counts.Total())
	}
	var desc strings.Builder
	fmt.Fprintf(&desc, "Stacked bars, one per %d seconds over the last %d minutes. In all: ", int(Step/time.Second), v.Minutes)
	for d := range NDecisions {
		if d > 0 {
			desc.WriteString(", ")
		}
		fmt.Fprintf(&desc, "%d %s", v.Totals[d], decisionNames[d])
	}
	fmt.Fprintf(&desc, ". The busiest %d seconds held %d requests.", int(Step/time.Second), most)
	pl := newPlot("decisions", "Requests by decision", desc.String(), most)
	for i, p := range pts {
		y := plotBottom
		for d, c := range p.Counts {
			if c == 0 {
				continue
			}
			h := int(c * uint64(plotBottom-plotTop) / pl.Max)
			h = max(h, 1)
			y -= h
			pl.Bars = append(pl.Bars, rect{X: plotLeft + i*slotW + 1, Y: y, W: barW, H: h, Class: decisionClasses[d]})
		}
	}
	return pl
}

func challengePlot(pts []Point, v *view) plot {
	var most uint64
	for _, p := range pts {
		most = max(most, p.Issued, p.Solved, p.Failed)
	}
	desc := fmt.Sprintf("Lines, one point per %d seconds over the last %d minutes. In all: %d challenges issued, %d solved, %d failed.",
		int(Step/time.Second), v.Minutes, v.Issued, v.Solved, v.Failed)
	pl := newPlot("challenges", "Challenges issued, solved and failed", desc, most)
	for _, s := range []struct {
		class string
		val   func(*Point) uint64
	}{
		{"issued", func(p *Point) uint64 { return p.Issued }},
		{"solved", func(p *Point) uint64 { return p.Solved }},
		{"failed", func(p *Point) uint64 { return p.Failed }},
	} {
		var b strings.Builder
		for i := range pts {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%d,%d", plotLeft+i*slotW+slotW/2, pl.y(s.val(&pts[i])))
		}
		pl.Lines = append(pl.Lines, line{Class: s.class, Points: b.String()})
	}
	return pl
}

// formatCount writes n with thin groups of three digits.
func formatCount(n uint64) string {
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString("\u202f")
		}
		b.WriteRune(c)
	}
	return b.String()
}
