package policy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// asnSet is a sorted set of autonomous system numbers; contains does not
// allocate.
type asnSet []uint32

func newASNSet(asns []uint32) asnSet {
	s := slices.Clone(asns)
	slices.Sort(s)
	return slices.Compact(s)
}

func (s asnSet) contains(asn uint32) bool {
	_, ok := slices.BinarySearch(s, asn)
	return ok
}

// hostingASNsFile is the built-in list of hosting and cloud networks.
const hostingASNsFile = "lists/hosting-asns.txt"

// parseASNList reads one ASN a line ("16509 # comment"); "AS16509" is
// accepted too.
func parseASNList(name string, data []byte) ([]uint32, error) {
	var out []uint32
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		asn, err := parseASN(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		out = append(out, asn)
	}
	return out, sc.Err()
}

func parseASN(s string) (uint32, error) {
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(s, "AS"), "as"), 10, 32)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("%q is not an AS number (1 to 4294967295)", s)
	}
	return uint32(v), nil
}

// builtinHostingASNs returns the built-in hosting list.
func builtinHostingASNs() ([]uint32, error) {
	data, err := embedded.ReadFile(hostingASNsFile)
	if err != nil {
		return nil, err
	}
	return parseASNList("(builtin)/hosting-asns.txt", data)
}

// hostingEdit is a hosting_asns: section: a list replaces the built-in
// list; {add: [...], remove: [...]} edits it.
type hostingEdit struct {
	replace     bool
	list        []uint32
	add, remove []uint32
}

func (e *hostingEdit) apply(set []uint32) []uint32 {
	if e.replace {
		return slices.Clone(e.list)
	}
	set = append(slices.Clone(set), e.add...)
	return slices.DeleteFunc(set, func(a uint32) bool { return slices.Contains(e.remove, a) })
}

// fileASNs is Anubis's asns: matcher: {match: [13335, …]}.
type fileASNs struct {
	Match []uint32 `yaml:"match" json:"match"`
}

// fileGeoIP is Anubis's geoip: matcher: {countries: [US, …]}.
type fileGeoIP struct {
	Countries []string `yaml:"countries" json:"countries"`
}

// compileGeo compiles the asns: and geoip: matchers of fr into r. Without
// the database a matcher needs, the rule loads with a warning and never
// matches.
func (p *Policy) compileGeo(r *rule, fr *fileRule) (int, error) {
	var errs []error
	n := 0
	if fr.ASNs != nil {
		n++
		if len(fr.ASNs.Match) == 0 {
			errs = append(errs, errors.New("asns: match: lists no AS number"))
		}
		for _, a := range fr.ASNs.Match {
			if a == 0 {
				errs = append(errs, errors.New("asns: 0 is not an AS number"))
			}
		}
		r.asns = newASNSet(fr.ASNs.Match)
		if !p.geo.ASN {
			r.never = true
			p.warnings = append(p.warnings, fmt.Sprintf("%s: rule %q: asns: needs an ASN database (geo.asn_db in edge.yaml); without one the rule never matches", fr.src, fr.Name))
		}
	}
	if fr.GeoIP != nil {
		n++
		if len(fr.GeoIP.Countries) == 0 {
			errs = append(errs, errors.New("geoip: countries: lists no country"))
		}
		for _, c := range fr.GeoIP.Countries {
			cc := strings.ToUpper(c)
			if len(cc) != 2 || cc[0] < 'A' || cc[0] > 'Z' || cc[1] < 'A' || cc[1] > 'Z' {
				errs = append(errs, fmt.Errorf("geoip: %q is not an ISO 3166-1 alpha-2 country code (US, DE, BR, …)", c))
				continue
			}
			r.countries = append(r.countries, cc)
		}
		if !p.geo.Country {
			r.never = true
			p.warnings = append(p.warnings, fmt.Sprintf("%s: rule %q: geoip: needs a country database (geo.country_db in edge.yaml); without one the rule never matches", fr.src, fr.Name))
		}
	}
	return n, errors.Join(errs...)
}

// matchGeo reports whether r's ASN and country satisfy ru's geo matchers.
func (ru *rule) matchGeo(r *Request) bool {
	if len(ru.asns) > 0 && (r.ASN == 0 || !ru.asns.contains(r.ASN)) {
		return false
	}
	if len(ru.countries) > 0 && (r.Country == "" || !slices.Contains(ru.countries, r.Country)) {
		return false
	}
	return true
}
