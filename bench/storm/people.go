package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/maatproxy/maat/internal/testattack"
)

// People browse the site as Chrome does (h2conn), one page at a time with
// a think time between pages, each from an address of its own (its own
// /24, 127.100+.x.1). Those with a pass earned theirs before the measured
// phases (warm-up), as the returning visitors of a site have; the others
// arrive with none. A challenged person solves the challenge, as their
// browser would, and goes on with the pass.

// phase is a part of the run.
type phase int

const (
	phaseWarm phase = iota
	phaseCalm
	phaseStorm
	numPhases
)

func (p phase) String() string { return [...]string{"warm-up", "calm", "storm"}[p] }

// personAddr is person i's address.
func personAddr(i int) net.IP { return net.IPv4(127, byte(100+i/250), byte(i%250), 1) }

// peopleStats are the people's requests of one group in one phase.
type peopleStats struct {
	requests, ok, challenged, failed int
	latencies                        []time.Duration // of every request, answered or not
}

// peopleTally gathers the people's requests.
type peopleTally struct {
	mu sync.Mutex
	// by phase, then [without a pass at the start, with one]
	s [numPhases][2]peopleStats
	// passes counts the people who earned a pass in the warm-up.
	passes   int
	earnErrs []string
}

func (t *peopleTally) add(ph phase, withPass bool, lat time.Duration, a answer, err error, challenged bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := 0
	if withPass {
		g = 1
	}
	s := &t.s[ph][g]
	s.requests++
	s.latencies = append(s.latencies, lat)
	switch {
	case err != nil:
		s.failed++
	case a.ok():
		s.ok++
	case challenged:
		s.challenged++
	default:
		s.failed++
	}
}

func (t *peopleTally) earnError(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.earnErrs) < 5 {
		t.earnErrs = append(t.earnErrs, err.Error())
	}
}

// percentile returns the p-th percentile (0–100) of d, 0 if empty.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// person is one visitor.
type person struct {
	id       int
	from     net.IP
	withPass bool // earns a pass in the warm-up
	jar      map[string]string
	conn     *h2conn
	n        int
	front    *front
}

// cookieHeader is the person's Cookie field.
func (p *person) cookieHeader() string {
	var b strings.Builder
	for k, v := range p.jar {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(k + "=" + v)
	}
	return b.String()
}

func (p *person) keep(a answer) {
	for _, c := range a.cookies {
		if k, v, ok := strings.Cut(c, "="); ok {
			p.jar[k] = v
		}
	}
}

// get asks for target over the person's connection, opening it again when
// the front closed it.
func (p *person) get(ctx context.Context, target string, timeout time.Duration) (answer, error) {
	f := p.front
	for try := 0; ; try++ {
		if p.conn == nil {
			c, err := dialH2(ctx, f.addr, f.host, p.from)
			if err != nil {
				return answer{}, err
			}
			p.conn = c
		}
		a, err := p.conn.get(target, testattack.ChromeHeaders, p.cookieHeader(), timeout)
		if err != nil {
			p.conn.close()
			p.conn = nil
			if try == 0 && a.status == 0 && ctx.Err() == nil && err != nil && !isTimeout(err) {
				continue // a connection the front had closed: once more on a new one
			}
			return a, err
		}
		p.keep(a)
		return a, nil
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// visit asks for the person's next page; when challenged, it solves the
// challenge (the front's solver) for the pages after it.
func (p *person) visit(ctx context.Context, f *front, clock *clock, tally *peopleTally, timeout time.Duration) {
	p.n++
	ph := clock.phase()
	t0 := time.Now()
	a, err := p.get(ctx, fmt.Sprintf("/p/%d/%d", p.id, p.n), timeout)
	lat := time.Since(t0)
	challenged := err == nil && !a.ok() && f.isChallenge(a)
	if ctx.Err() != nil && err != nil {
		return // the run ended under it
	}
	tally.add(ph, p.withPass, lat, a, err, challenged)
	if challenged {
		if err := f.solve(ctx, p, a, timeout); err != nil {
			tally.earnError(err)
		}
	}
}

// earn gets the person a pass before the measured phases: one minted
// with the front's secret, when it has a minter, then a page; and the
// challenge's solution if the front challenges that page.
func (p *person) earn(ctx context.Context, f *front, tally *peopleTally, timeout time.Duration) {
	minted := false
	if f.mint != nil {
		c, err := f.mint(p)
		if err != nil {
			tally.earnError(err)
		} else if k, v, ok := strings.Cut(c, "="); ok {
			p.jar[k], minted = v, true
		}
	}
	a, err := p.get(ctx, fmt.Sprintf("/p/%d/warm", p.id), timeout)
	if err != nil {
		tally.earnError(err)
		return
	}
	if minted && a.ok() {
		tally.mu.Lock()
		tally.passes++
		tally.mu.Unlock()
		return
	}
	if minted {
		tally.earnError(fmt.Errorf("a minted pass was answered %d", a.status))
	}
	if a.ok() || !f.isChallenge(a) {
		return
	}
	if err := f.solve(ctx, p, a, timeout); err != nil {
		tally.earnError(err)
		return
	}
	tally.mu.Lock()
	tally.passes++
	tally.mu.Unlock()
}
