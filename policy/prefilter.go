package policy

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// A prefilter finds, in one pass over a string, which of many literals it
// contains (ASCII case-insensitively). Each regular expression of a field is
// reduced to a set of literals one of which every match must contain; the
// regexp runs only when one of them is present, and not at all when the
// expression is nothing but an alternation of literals. This keeps a policy
// of a thousand User-Agent rules from running a thousand regexps.

// maxLiterals bounds the literals one prefilter tracks (the bitset Evaluate
// keeps on its stack); regexps beyond it always run.
const maxLiterals = 64 * 64

type litBits [maxLiterals / 64]uint64

func (b *litBits) set(i int32)      { b[i>>6] |= 1 << (i & 63) }
func (b *litBits) has(i int32) bool { return b[i>>6]&(1<<(i&63)) != 0 }

type prefilter struct {
	lits   []string           // lower-cased, len >= 2
	bigram [65536 / 64]uint64 // first two bytes (lower-cased) present
	// headAt maps the first two bytes of literals (lower-cased) to 1 +
	// their index in heads, 0 when no literal starts so: an array rather
	// than a map, because scan looks it up at every bigram it finds.
	headAt []uint16
	heads  [][]int32 // literal indexes by first two bytes
	index  map[string]int32
}

// regexMatcher is one compiled regular expression with its prefilter data.
type regexMatcher struct {
	re    *regexp.Regexp
	lits  []int32 // literal indexes; nil means no prefilter: always run
	sum   uint64  // the literal indexes modulo 64, as bits: a quick "none found"
	exact bool    // containing one literal is the same as matching
}

func newPrefilter() *prefilter {
	return &prefilter{headAt: make([]uint16, 1<<16), index: map[string]int32{}}
}

func lower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

func (p *prefilter) add(lit string) (int32, bool) {
	lit = strings.ToLower(lit)
	if i, ok := p.index[lit]; ok {
		return i, true
	}
	if len(p.lits) >= maxLiterals {
		return 0, false
	}
	i := int32(len(p.lits))
	p.lits = append(p.lits, lit)
	p.index[lit] = i
	k := uint16(lit[0])<<8 | uint16(lit[1])
	p.bigram[k>>6] |= 1 << (k & 63)
	if p.headAt[k] == 0 {
		p.heads = append(p.heads, nil)
		p.headAt[k] = uint16(len(p.heads)) // at most maxLiterals: fits
	}
	h := p.headAt[k] - 1
	p.heads[h] = append(p.heads[h], i)
	return i, true
}

// compile compiles expr and registers its literals.
func (p *prefilter) compile(expr string) (*regexMatcher, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	m := &regexMatcher{re: re}
	tree, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return m, nil
	}
	tree = tree.Simplify()
	lits, exact, ok := literalSet(tree)
	if !ok {
		return m, nil
	}
	for _, l := range lits {
		if len(l.s) < 2 || !asciiOnly(l.s) {
			return m, nil // too short to index, or unicode folding
		}
	}
	ids := make([]int32, 0, len(lits))
	for _, l := range lits {
		i, ok := p.add(l.s)
		if !ok {
			return m, nil
		}
		ids = append(ids, i)
		m.sum |= 1 << (i & 63)
		if !l.fold {
			exact = false // the prefilter folds case; the regexp must check
		}
	}
	m.lits, m.exact = ids, exact
	return m, nil
}

func asciiOnly(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

type lit struct {
	s    string
	fold bool
}

// maxLitSet bounds the literal alternatives one regexp contributes.
const maxLitSet = 64

// literalSet returns literals one of which every match of re contains, and
// whether containing one of them is exactly what re matches (an unanchored
// alternation of literals). ok is false when no such set is known.
func literalSet(re *syntax.Regexp) (lits []lit, exact, ok bool) {
	switch re.Op {
	case syntax.OpLiteral:
		return []lit{{string(re.Rune), re.Flags&syntax.FoldCase != 0}}, true, true
	case syntax.OpCapture:
		return literalSet(re.Sub[0])
	case syntax.OpPlus:
		l, _, ok := literalSet(re.Sub[0])
		return l, false, ok
	case syntax.OpRepeat:
		if re.Min < 1 {
			return nil, false, false
		}
		l, _, ok := literalSet(re.Sub[0])
		return l, false, ok
	case syntax.OpAlternate:
		exact = true
		for _, sub := range re.Sub {
			l, e, ok := literalSet(sub)
			if !ok || len(lits)+len(l) > maxLitSet {
				return nil, false, false
			}
			lits = append(lits, l...)
			exact = exact && e
		}
		return lits, exact, true
	case syntax.OpConcat:
		// Pick the operand whose shortest literal is longest.
		best := -1
		for _, sub := range re.Sub {
			l, _, ok := literalSet(sub)
			if !ok {
				continue
			}
			if m := minLen(l); m > best {
				best, lits = m, l
			}
		}
		return lits, false, best > 0
	}
	return nil, false, false
}

func minLen(ls []lit) int {
	m := -1
	for _, l := range ls {
		if m < 0 || len(l.s) < m {
			m = len(l.s)
		}
	}
	return m
}

// scan sets in found the literals s contains, and in sum their indexes
// modulo 64. When s is not ASCII the prefilter cannot rule anything out
// (Unicode case folding) and all reports true: the caller then runs every
// regexp.
func (p *prefilter) scan(s string, found *litBits, sum *uint64) (all bool) {
	if len(p.lits) == 0 {
		return false
	}
	if !asciiOnly(s) {
		return true
	}
	for i := 0; i+1 < len(s); i++ {
		k := uint16(lower(s[i]))<<8 | uint16(lower(s[i+1]))
		if p.bigram[k>>6]&(1<<(k&63)) == 0 {
			continue
		}
		for _, id := range p.heads[p.headAt[k]-1] {
			if found.has(id) {
				continue
			}
			l := p.lits[id]
			if len(s)-i >= len(l) && foldHasPrefix(s[i:], l) {
				found.set(id)
				*sum |= 1 << (id & 63)
			}
		}
	}
	return false
}

// foldHasPrefix reports whether s starts with the lower-case ASCII lit,
// ignoring ASCII case.
func foldHasPrefix(s, lit string) bool {
	for j := 2; j < len(lit); j++ {
		if lower(s[j]) != lit[j] {
			return false
		}
	}
	return true
}

// absent reports, from the scan's summary alone, that none of m's literals
// is in the string, so that m cannot match.
func (m *regexMatcher) absent(sum uint64, all bool) bool {
	return m.lits != nil && !all && m.sum&sum == 0
}

// match runs m on s given the scan's result.
func (m *regexMatcher) match(s string, found *litBits, sum uint64, all bool) bool {
	if m.lits != nil && !all {
		if m.sum&sum == 0 {
			return false // none of m's literals is in s
		}
		hit := false
		for _, id := range m.lits {
			if found.has(id) {
				hit = true
				break
			}
		}
		if !hit {
			return false
		}
		if m.exact {
			return true
		}
	}
	return m.re.MatchString(s)
}
