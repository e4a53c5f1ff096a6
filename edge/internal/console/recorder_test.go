package console

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/maatproxy/maat/fplog"
)

var t0 = time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)

func TestRecorderBuckets(t *testing.T) {
	t.Parallel()
	r := NewRecorder()
	r.Record(&Request{Time: t0, Action: fplog.ActionAllow})
	r.Record(&Request{Time: t0.Add(time.Second), Action: fplog.ActionDeny})
	r.Record(&Request{Time: t0.Add(Step), Action: fplog.ActionChallenge})
	r.Record(&Request{Time: t0.Add(Step), Action: ""}) // answered before a decision
	r.ChallengeResult(t0.Add(Step+time.Second), true)
	r.ChallengeResult(t0.Add(Step+time.Second), false)
	r.ChallengeResult(t0.Add(Step+time.Second), false)

	s := r.Snapshot(t0.Add(Step), Rows)
	if len(s.Points) != Buckets {
		t.Fatalf("%d points, want %d", len(s.Points), Buckets)
	}
	last, prev := s.Points[Buckets-1], s.Points[Buckets-2]
	if want := (Counts{Allow: 1, Deny: 1}); prev.Counts != want {
		t.Errorf("the step before: %v, want %v", prev.Counts, want)
	}
	if want := (Counts{Challenge: 1}); last.Counts != want || last.Issued != 1 || last.Solved != 1 || last.Failed != 2 || last.Unanswered != 1 {
		t.Errorf("the last step: %+v", last)
	}
	if !last.Start.Equal(t0.Add(Step)) {
		t.Errorf("the last step starts %v, want %v", last.Start, t0.Add(Step))
	}

	// A step the window left is gone; its slot holds a new step.
	later := t0.Add(Window)
	r.Record(&Request{Time: later, Action: fplog.ActionRate})
	s = r.Snapshot(later, Rows)
	var all Counts
	for _, p := range s.Points {
		for d, c := range p.Counts {
			all[d] += c
		}
	}
	if want := (Counts{Challenge: 1, Rate: 1}); all != want {
		t.Errorf("after a window: %v, want %v (t0's step dropped)", all, want)
	}
	// A request older than the window (a long download that began before
	// it) does not empty the newer step of its slot.
	r.Record(&Request{Time: t0, Action: fplog.ActionAllow})
	s = r.Snapshot(later, Rows)
	if got := s.Points[Buckets-1].Counts; got != (Counts{Rate: 1}) {
		t.Errorf("a request older than the window changed the newest step: %v", got)
	}
}

func TestRecorderTables(t *testing.T) {
	t.Parallel()
	r := NewRecorder()
	heavy := netip.MustParseAddr("203.0.113.7")
	for i := range 50 {
		r.Record(&Request{Time: t0, Site: "example.org", Action: fplog.ActionDeny, JA4: "t13d_heavy", Family: "python",
			ASN: 64500, ASOrg: "Example AS", Rules: []string{"bad-bot", "weigh-ua"}, Client: heavy})
		if i%5 == 0 {
			r.Record(&Request{Time: t0, Site: "example.org", Action: fplog.ActionAllow, JA4: "t13d_light", Client: netip.MustParseAddr("198.51.100.1")})
		}
	}
	// A flood of keys each seen once cannot push the heavy ones out.
	for i := range 1000 {
		r.Record(&Request{Time: t0, Site: "example.org", Action: fplog.ActionChallenge, JA4: fmt.Sprintf("t13d_%04d", i),
			Client: netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1})})
	}
	s := r.Snapshot(t0, Rows)
	if len(s.JA4) != Rows || s.JA4[0].Key != "t13d_heavy" || s.JA4[0].Count < 50 || s.JA4[0].Counts[Deny] != 50 {
		t.Errorf("top JA4: %+v", s.JA4)
	}
	if len(s.Sites) != 1 || s.Sites[0].Count != 1060 {
		t.Errorf("sites: %+v, want example.org with 1060", s.Sites)
	}
	if s.Families[0].Key != unknownFamily || s.Families[0].Count != 1010 || s.Families[1].Key != "python" {
		t.Errorf("families: %+v", s.Families)
	}
	if len(s.ASNs) != 1 || s.ASNs[0].Key != (ASN{64500, "Example AS"}) || s.ASNs[0].Count != 50 {
		t.Errorf("ASNs: %+v", s.ASNs)
	}
	if len(s.Rules) != 2 || s.Rules[0].Count != 50 || s.Rules[1].Count != 50 {
		t.Errorf("rules: %+v", s.Rules)
	}
	if s.Clients[0].Key != heavy || s.Clients[0].Count < 50 {
		t.Errorf("top client: %+v", s.Clients[0])
	}
	if len(s.Clients) > 2*tracked {
		t.Errorf("%d clients tracked, want at most %d", len(s.Clients), 2*tracked)
	}
}

func TestRecorderGenerations(t *testing.T) {
	t.Parallel()
	r := NewRecorder()
	start := time.Unix(t0.Unix()/int64(generation/time.Second)*int64(generation/time.Second), 0)
	r.Record(&Request{Time: start, Action: fplog.ActionAllow, JA4: "old"})
	r.Record(&Request{Time: start.Add(generation), Action: fplog.ActionAllow, JA4: "new"})
	if s := r.Snapshot(start.Add(generation), Rows); len(s.JA4) != 2 {
		t.Errorf("one generation on: %+v, want old and new", s.JA4)
	}
	if s := r.Snapshot(start.Add(2*generation), Rows); len(s.JA4) != 1 || s.JA4[0].Key != "new" {
		t.Errorf("two generations on: %+v, want new alone", s.JA4)
	}
	r.Record(&Request{Time: start.Add(2 * generation), Action: fplog.ActionAllow, JA4: "newer"})
	if s := r.Snapshot(start.Add(2*generation), Rows); len(s.JA4) != 2 || s.JA4[0].Key == "old" || s.JA4[1].Key == "old" {
		t.Errorf("after a rotation: %+v, want new and newer", s.JA4)
	}
	if s := r.Snapshot(start.Add(5*generation), Rows); len(s.JA4) != 0 {
		t.Errorf("long after: %+v, want nothing", s.JA4)
	}
	r.Record(&Request{Time: start.Add(5 * generation), Action: fplog.ActionAllow, JA4: "latest"})
	if s := r.Snapshot(start.Add(5*generation), Rows); len(s.JA4) != 1 || s.JA4[0].Key != "latest" {
		t.Errorf("after a long pause: %+v, want latest alone", s.JA4)
	}
}

// TestRecordDoesNotAllocate: a request path may call Record, also when
// every key is new and evicts another.
func TestRecordDoesNotAllocate(t *testing.T) {
	r := NewRecorder()
	reqs := benchRequests(4096)
	i := 0
	for range 10000 { // fill the tables and let the maps settle
		r.Record(&reqs[i%len(reqs)])
		i++
	}
	if n := testing.AllocsPerRun(20000, func() {
		q := &reqs[i%len(reqs)]
		q.Time = t0.Add(time.Duration(i) * time.Millisecond)
		r.Record(q)
		i++
	}); n != 0 {
		t.Errorf("Record allocates %v times", n)
	}
}

func benchRequests(n int) []Request {
	reqs := make([]Request, n)
	actions := []string{fplog.ActionAllow, fplog.ActionPass, fplog.ActionChallenge, fplog.ActionDeny}
	rules := []string{"bad-bot", "weigh-ua"}
	for i := range reqs {
		reqs[i] = Request{Time: t0, Site: "example.org", Action: actions[i%len(actions)], Rules: rules[:i%3%2+1],
			JA4: fmt.Sprintf("t13d1516h2_8daaf6152771_%012x", i), Family: []string{"chrome", "firefox", "", "curl"}[i%4],
			ASN: uint32(64500 + i%300), ASOrg: "Example", Client: netip.AddrFrom4([4]byte{192, 0, byte(i >> 8), byte(i)})}
	}
	return reqs
}

func BenchmarkRecord(b *testing.B) {
	r := NewRecorder()
	reqs := benchRequests(4096)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.Record(&reqs[i%len(reqs)])
		i++
	}
}

func BenchmarkRecordParallel(b *testing.B) {
	r := NewRecorder()
	reqs := benchRequests(4096)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r.Record(&reqs[i%len(reqs)])
			i++
		}
	})
}

// BenchmarkRecordKnown: every key is tracked already (a calm site).
func BenchmarkRecordKnown(b *testing.B) {
	r := NewRecorder()
	reqs := benchRequests(32)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.Record(&reqs[i%len(reqs)])
		i++
	}
}
