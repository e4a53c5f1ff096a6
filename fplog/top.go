package fplog

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"
)

// DefaultTopLimit is the number of rows Top returns when TopOptions.Limit
// is zero.
const DefaultTopLimit = 20

// ErrUnknownBy is returned for a TopOptions.By that names no field.
var ErrUnknownBy = errors.New("fplog: unknown -by field")

// byFields maps the names of TopOptions.By to the values of a record.
var byFields = map[string]func(r *Record) string{
	"ja4":    func(r *Record) string { return r.JA4 },
	"ja4_r":  func(r *Record) string { return r.JA4R },
	"ja4_o":  func(r *Record) string { return r.JA4O },
	"ja4_ro": func(r *Record) string { return r.JA4RO },
	// The JA4 the policy judged the request by: a resumed session's full
	// handshake's (ja4_session), else the hello's.
	"ja4_session": func(r *Record) string {
		if r.JA4Session != "" {
			return r.JA4Session
		}
		return r.JA4
	},
	"hfp":     func(r *Record) string { return r.HFP },
	"hfp_r":   func(r *Record) string { return r.HFPR },
	"h2fp":    func(r *Record) string { return r.H2FP },
	"ja4h":    func(r *Record) string { return r.JA4H },
	"ua":      func(r *Record) string { return r.UserAgent },
	"family":  func(r *Record) string { return r.ClientFamily },
	"ip":      func(r *Record) string { return r.ClientIP },
	"asn":     func(r *Record) string { return formatNonZero(uint64(r.ASN)) },
	"as_org":  func(r *Record) string { return r.ASOrg },
	"country": func(r *Record) string { return r.Country },
	"host":    func(r *Record) string { return r.Host },
	"method":  func(r *Record) string { return r.Method },
	"path":    func(r *Record) string { return r.Path },
	"proto":   func(r *Record) string { return r.Proto },
	"status":  func(r *Record) string { return formatNonZero(uint64(max(r.Status, 0))) },
	"action":  func(r *Record) string { return r.Action },
	"reason":  func(r *Record) string { return r.Reason },
	"rule":    nil, // one count per rule of the record
}

// formatNonZero returns n in decimal, or "" for zero: the field was absent.
func formatNonZero(n uint64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatUint(n, 10)
}

// TopOptions selects what Top counts.
type TopOptions struct {
	// By is the field counted: ja4, ja4_r, ja4_o, ja4_ro, hfp, hfp_r, h2fp,
	// ja4h, ua (user_agent), family (client_family), ip (remote_ip), asn,
	// as_org, country, host, method, path, proto, status, action, reason,
	// or rule (each rule of a record's rules counts once; a rule and the
	// signal it is named for, "fake-crawler" and "fake_crawler", are one
	// row, shown in the first spelling in sort order). If empty, ja4.
	By string
	// Since skips records older than it, and records without a time. If
	// zero, every record counts.
	Since time.Time
	// Host, if set, counts only the records of that host (the request's
	// Host, compared without case and port).
	Host string
	// Action, if set, counts only the records of that action (ALLOW,
	// CHALLENGE, DENY, RATE, DIVERT or PASS; compared without case).
	Action string
	// Limit is the number of rows returned, the most frequent first. If
	// zero, DefaultTopLimit; if negative, all.
	Limit int
	// Stdin is read for the file name "-". If nil, os.Stdin is.
	Stdin io.Reader
}

// ByFields returns the names TopOptions.By accepts, sorted.
func ByFields() []string {
	names := make([]string, 0, len(byFields))
	for name := range byFields {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// TopRow is one value of the counted field.
type TopRow struct {
	Value   string           `json:"value"`   // "" for records without the field
	Count   int64            `json:"count"`   // records with the value
	Share   float64          `json:"share"`   // Count over the records counted, 0 to 1
	Actions map[string]int64 `json:"actions"` // records with the value, by action
}

// Counter counts the values of one field over log lines. Top is a Counter
// over files; use a Counter to read other sources or to learn how many lines
// were bad.
type Counter struct {
	by       string
	value    func(*Record) string
	since    time.Time
	host     string
	action   string
	rows     map[string]*TopRow
	records  int64
	bad      int64
	old      int64
	filtered int64
}

// NewCounter returns a Counter for opts.
func NewCounter(opts TopOptions) (*Counter, error) {
	by := opts.By
	if by == "" {
		by = "ja4"
	}
	value, ok := byFields[by]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownBy, by)
	}
	return &Counter{by: by, value: value, since: opts.Since, host: hostOnly(opts.Host), action: opts.Action,
		rows: make(map[string]*TopRow)}, nil
}

// hostOnly returns a Host without its port, lowercased.
func hostOnly(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") && (h[0] == '[' || strings.Count(h, ":") == 1) {
		h = h[:i]
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
}

// Records returns the number of records counted.
func (c *Counter) Records() int64 { return c.records }

// Bad returns the number of lines that were not records, or too long.
func (c *Counter) Bad() int64 { return c.bad }

// Old returns the number of records skipped for being older than Since.
func (c *Counter) Old() int64 { return c.old }

// Filtered returns the number of records skipped for another host or
// action than TopOptions.Host and Action.
func (c *Counter) Filtered() int64 { return c.filtered }

// Add counts one record.
func (c *Counter) Add(r *Record) {
	if !c.since.IsZero() && r.Time.Before(c.since) {
		c.old++
		return
	}
	if c.host != "" && hostOnly(r.Host) != c.host || c.action != "" && !strings.EqualFold(r.Action, c.action) {
		c.filtered++
		return
	}
	c.records++
	if c.value != nil {
		c.count(c.value(r), r.Action)
		return
	}
	if len(r.Rules) == 0 {
		c.count("", r.Action)
	}
	for i, rule := range r.Rules {
		if !slices.ContainsFunc(r.Rules[:i], func(s string) bool { return ruleKey(s) == ruleKey(rule) }) {
			c.count(rule, r.Action)
		}
	}
}

// ruleKey is the row of a name in the rules field: a rule and the signal
// it is named for ("fake-crawler" and "fake_crawler") are one row.
func ruleKey(name string) string { return strings.ReplaceAll(name, "-", "_") }

func (c *Counter) count(value, action string) {
	key := value
	if c.value == nil {
		key = ruleKey(value)
	}
	row := c.rows[key]
	if row == nil {
		row = &TopRow{Value: value, Actions: make(map[string]int64)}
		c.rows[key] = row
	}
	row.Value = min(row.Value, value) // the same spelling whatever the order read
	row.Count++
	row.Actions[action]++
}

// Read counts the lines of r, plain or gzip. Bad lines are counted and
// skipped; only errors of r itself (or of a corrupt gzip stream) are
// returned.
func (c *Counter) Read(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("fplog: gzip: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 64<<10)
	}
	return readLines(br, c.line)
}

// ReadFile counts the lines of the named file, plain or gzip.
func (c *Counter) ReadFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("fplog: %w", err)
	}
	defer f.Close()
	if err := c.Read(f); err != nil {
		return fmt.Errorf("%w (%s)", err, name)
	}
	return nil
}

func (c *Counter) line(b []byte, tooLong bool) bool {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return true
	}
	if tooLong {
		c.bad++
		return true
	}
	r, err := ParseLine(b)
	if err != nil {
		c.bad++
		return true
	}
	c.Add(&r)
	return true
}

// readLines calls fn for each line of br, without its newline; a line
// longer than MaxLineBytes is passed truncated, with tooLong set. It stops
// early when fn returns false.
func readLines(br *bufio.Reader, fn func(line []byte, tooLong bool) bool) error {
	var long []byte
	for {
		b, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			more := true
			if long != nil {
				more = fn(long, len(long)+len(b)-1 > MaxLineBytes)
				long = nil
			} else {
				more = fn(b[:len(b)-1], false)
			}
			if !more {
				return nil
			}
		case errors.Is(err, bufio.ErrBufferFull):
			if len(long) <= MaxLineBytes {
				long = append(long, b...)
			}
		case errors.Is(err, io.EOF):
			if long != nil || len(b) > 0 {
				fn(append(long, b...), len(long)+len(b) > MaxLineBytes)
			}
			return nil
		default:
			return err
		}
	}
}

// Rows returns the counted values, the most frequent first (ties by value),
// at most limit of them (all if limit is negative, DefaultTopLimit if zero).
func (c *Counter) Rows(limit int) []TopRow {
	rows := make([]TopRow, 0, len(c.rows))
	for _, row := range c.rows {
		r := *row
		if c.records > 0 {
			r.Share = float64(r.Count) / float64(c.records)
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b TopRow) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Value, b.Value))
	})
	if limit == 0 {
		limit = DefaultTopLimit
	}
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	return rows
}

// Top counts the values of a field over log files, plain or gzip, and
// returns the most frequent. The file name "-" reads opts.Stdin (the
// standard input if nil), once. Bad lines are skipped; a file that cannot be
// read is an error.
func Top(files []string, opts TopOptions) ([]TopRow, error) {
	c, err := NewCounter(opts)
	if err != nil {
		return nil, err
	}
	stdinRead := false
	for _, name := range files {
		if name != "-" {
			if err := c.ReadFile(name); err != nil {
				return nil, err
			}
			continue
		}
		if stdinRead {
			continue // read to its end already
		}
		stdinRead = true
		var in io.Reader = os.Stdin
		if opts.Stdin != nil {
			in = opts.Stdin
		}
		if err := c.Read(in); err != nil {
			return nil, fmt.Errorf("%w (standard input)", err)
		}
	}
	return c.Rows(opts.Limit), nil
}

// maxTableValue bounds the values shown in a table, in characters.
const maxTableValue = 100

// WriteTopTable writes rows as an aligned table: count, share, value, and
// the actions the value got. Values are shown quoted if they hold characters
// a terminal would interpret, and cut if long.
func WriteTopTable(w io.Writer, rows []TopRow) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "COUNT\tSHARE\tVALUE\tACTIONS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%.1f%%\t%s\t%s\n", r.Count, 100*r.Share, tableValue(r.Value), actions(r.Actions))
	}
	return tw.Flush()
}

func tableValue(v string) string {
	if v == "" {
		return "(none)"
	}
	if utf8.RuneCountInString(v) > maxTableValue {
		runes := []rune(v)
		v = string(runes[:maxTableValue-1]) + "…"
	}
	for _, r := range v {
		if !strconv.IsGraphic(r) || r == '\t' {
			return strconv.QuoteToGraphic(v)
		}
	}
	return v
}

func actions(m map[string]int64) string {
	names := make([]string, 0, len(m))
	for a := range m {
		names = append(names, a)
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b))
	})
	parts := make([]string, len(names))
	for i, a := range names {
		parts[i] = fmt.Sprintf("%s %d", cmp.Or(tableValue(a), "(none)"), m[a])
	}
	return strings.Join(parts, ", ")
}

// WriteTopJSON writes rows as one JSON array, for machines.
func WriteTopJSON(w io.Writer, rows []TopRow) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if rows == nil {
		rows = []TopRow{}
	}
	return enc.Encode(rows)
}
