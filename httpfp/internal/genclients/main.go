// Command genclients generates httpfp's table of known HTTP/2 clients
// (clients_table.go): HTTP/2 connection preface (the h2fp's SETTINGS,
// WINDOW_UPDATE and PRIORITY fields) → client family, versions, the
// pseudo-header order of its first request, and provenance. Run it with
// `go generate ./httpfp`.
//
// Rows come from the real clients installed on the machine (Chromium,
// Firefox ESR, curl, Node's http2, https and fetch, Python's urllib and
// requests, Java's HttpClient, Go's net/http and x/net/http2: see
// internal/testcapture.RunAll), each run against a capture server on
// 127.0.0.1; a missing program is reported and skipped. Every request they
// sent is merged into the capture file (-capture) with its client's
// version, JA4, h2fp and hfp_r: the evidence for the rows, and for
// tlsfp's rows of the same clients. A client's records of other versions
// (captured on another machine, or before an upgrade) are kept.
//
// The output is sorted and carries no timestamps, so the same machine and
// module versions produce the same files. When several clients share a
// preface, the row names the family that comes first in familyOrder, the
// versions of that family, and every source. A preface whose SETTINGS
// frame is empty (Node's) makes no row: too many clients send one.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io/fs"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/maatproxy/maat/internal/testcapture"
)

// familyOrder decides which family names a preface that several clients
// share: browsers before the libraries they are built on.
var familyOrder = []string{"chrome", "edge", "firefox", "safari", "ios", "curl", "git", "wget", "python", "node", "java", "go"}

func main() {
	out := flag.String("o", "clients_table.go", "output file")
	capture := flag.String("capture", "testdata/clients.jsonl", "capture file")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("genclients: ")

	recs, err := run(*capture)
	if err != nil {
		log.Fatal(err)
	}
	var b strings.Builder
	for _, r := range recs {
		line, err := json.Marshal(r)
		if err != nil {
			log.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(*capture, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
	src, err := render(merge(recs))
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		log.Fatal(err)
	}
}

// run captures every installed client's requests and merges them into
// the records of the capture file before: a client's earlier records stay
// unless this run captured the same client at the same version (another
// version of Chromium, from another machine, keeps its rows), so the
// tables only grow with new versions, and a client that is not installed
// here loses nothing.
func run(capture string) ([]testcapture.Record, error) {
	s, err := testcapture.NewServer()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	recs, skipped := testcapture.RunAll(context.Background(), s)
	for _, m := range skipped {
		log.Printf("skipping %s", m)
	}
	before, err := readCapture(capture)
	if err != nil {
		return nil, err
	}
	fresh := map[[2]string]bool{}
	for _, r := range recs {
		fresh[[2]string{r.Client, r.Version}] = true
	}
	for _, r := range before {
		if !fresh[[2]string{r.Client, r.Version}] {
			recs = append(recs, r)
		}
	}
	slices.SortStableFunc(recs, func(a, b testcapture.Record) int {
		return cmp.Or(cmp.Compare(a.Client, b.Client), compareVersions(a.Version, b.Version), cmp.Compare(a.Path, b.Path))
	})
	return recs, nil
}

// readCapture reads a capture file; a missing one is empty.
func readCapture(file string) ([]testcapture.Record, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []testcapture.Record
	for line := range strings.Lines(string(b)) {
		var r testcapture.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// compareVersions orders dotted version numbers numerically.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range min(len(as), len(bs)) {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(as), len(bs))
}

// row is one row of the table.
type row struct {
	preface, family, versions, pseudo string
	sources                           []string
}

// merge groups the HTTP/2 records by connection preface.
func merge(recs []testcapture.Record) []row {
	byPreface := map[string][]testcapture.Record{}
	for _, r := range recs {
		if r.H2FP == "" {
			continue
		}
		i := strings.LastIndexByte(r.H2FP, '|')
		if strings.HasPrefix(r.H2FP, "|") {
			log.Printf("no row for %s: its SETTINGS frame is empty (%s)", r.Client, r.H2FP)
			continue
		}
		byPreface[r.H2FP[:i]] = append(byPreface[r.H2FP[:i]], r)
	}
	var out []row
	for preface, rs := range byPreface {
		slices.SortStableFunc(rs, func(a, b testcapture.Record) int {
			return cmp.Compare(slices.Index(familyOrder, a.Family), slices.Index(familyOrder, b.Family))
		})
		first := rs[0]
		m := row{preface: preface, family: first.Family, pseudo: first.H2FP[strings.LastIndexByte(first.H2FP, '|')+1:]}
		var versions []string
		for _, r := range rs {
			if !slices.Contains(m.sources, r.Source) {
				m.sources = append(m.sources, r.Source)
			}
			if r.Family == m.family && !slices.Contains(versions, r.Version) {
				versions = append(versions, r.Version)
			}
		}
		slices.SortFunc(versions, compareVersions)
		m.versions = versions[0]
		if len(versions) > 1 {
			m.versions += "-" + versions[len(versions)-1]
		}
		slices.Sort(m.sources)
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b row) int { return cmp.Compare(a.preface, b.preface) })
	return out
}

func render(rows []row) ([]byte, error) {
	var b strings.Builder
	b.WriteString("// Code generated by httpfp/internal/genclients; DO NOT EDIT.\n\n")
	b.WriteString("package httpfp\n\n")
	b.WriteString("// knownClients maps an HTTP/2 connection preface (an h2fp's SETTINGS,\n")
	b.WriteString("// WINDOW_UPDATE and PRIORITY fields) to the client that sends it. Read-only.\n")
	b.WriteString("// Source: real clients run against a capture server on loopback, one row\n")
	b.WriteString("// each; testdata/clients.jsonl holds their requests.\n")
	b.WriteString("var knownClients = map[string]Client{\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "\t%q: {Family: %q, Versions: %q, Pseudo: %q, Source: %q},\n",
			r.preface, r.family, r.versions, r.pseudo, strings.Join(r.sources, "; "))
	}
	b.WriteString("}\n")
	return format.Source([]byte(b.String()))
}
