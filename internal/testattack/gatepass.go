package testattack

import (
	"context"
	"crypto/tls"
	"fmt"

	utls "github.com/refraction-networking/utls"
)

// The pass cases: what a pass cookie is worth (issue 33, items 2, 3, 9).

// gateWait: a rule asking for 28 bits (Anubis difficulty 7) must offer
// no wait, and neither a wait's pass nor a 16-bit one may meet it; where
// 16 bits are asked, the wait is offered to an honest browser and its
// pass holds there.
func gateWait(ctx context.Context, t GateTarget, out *GateOutcome) error {
	t.Upstream.Record(1000)
	const noPass = "403, a challenge of 28 bits"

	offered := out.Attack("a 28-bit rule (Anubis difficulty 7) offers the wait", "403, 28 bits, no wait")
	hard := chromeVisitor(t.Target, blockGateWait, 0)
	a, err := hard.get(ctx, "/gate/hard/offer")
	var p challengePage
	if err != nil {
		offered.Add("h2", gateErrKind(err), false)
	} else {
		p = parseChallenge(a.Body)
		offered.Add("h2", p.describe(a.Status), p.wait != "")
	}
	taken := out.Attack("… that wait taken, then the 28-bit rule", noPass)
	if p.wait == "" {
		taken.Note("no wait offered")
	} else {
		if err := hard.takeWait(ctx, p); err != nil {
			taken.Note("the wait gave no pass: %v", err)
		} else {
			t.tryPass(ctx, taken, hard, "/gate/hard/after-its-wait")
		}
	}

	honest := out.Honest("the wait where 16 bits are asked (Chrome), then its pass there", "the wait offered; 200 after it")
	waiter := chromeVisitor(t.Target, blockGateWait, 1)
	waited := false
	if a, err := waiter.get(ctx, "/gate/easy/wait"); err != nil {
		honest.Add("h2", gateErrKind(err), true)
	} else if p := parseChallenge(a.Body); p.wait == "" {
		honest.Add("h2", p.describe(a.Status), true)
	} else if err := waiter.takeWait(ctx, p); err != nil {
		honest.Add("h2", "the wait gave no pass", true)
		honest.Note("%v", err)
	} else {
		waited = true
		t.tryHonest(ctx, honest, waiter, "/gate/easy/after-the-wait")
	}
	w := out.Attack("a wait's pass (earned where 16 bits are asked) on the 28-bit rule", noPass)
	if waited {
		t.tryPass(ctx, w, waiter, "/gate/hard/waited")
	} else {
		w.Note("no wait's pass to try")
	}

	pow := out.Attack("a 16-bit proof of work's pass on the 28-bit rule", noPass)
	solver := chromeVisitor(t.Target, blockGateWait, 2)
	if _, err := solver.earnPoW(ctx, "/gate/easy/pow", 20); err != nil {
		pow.Note("no pass earned: %v", err)
		return nil
	}
	t.tryPass(ctx, pow, solver, "/gate/hard/pow")
	return nil
}

// tryPass asks for target with v's pass and records in row whether it got
// through (an answer 2xx, or the upstream saw it).
func (t Target) tryPass(ctx context.Context, row *GateRow, v *visitor, target string) {
	a, err := v.get(ctx, target)
	if err != nil {
		row.Add(v.base.Proto, gateErrKind(err), false)
		return
	}
	row.Add(v.base.Proto, a.kind(), t.passed(a, target))
}

// tryHonest asks for target with v's pass and records in an honest row
// whether it was refused.
func (t Target) tryHonest(ctx context.Context, row *GateRow, v *visitor, target string) {
	a, err := v.get(ctx, target)
	if err != nil {
		row.Add(v.base.Proto, gateErrKind(err), true)
		return
	}
	row.Add(v.base.Proto, a.kind(), !t.passed(a, target))
}

// passed reports whether a request for target got through: its answer
// was 2xx, or the upstream saw it.
func (t Target) passed(a Answer, target string) bool {
	return a.Status/100 == 2 || t.reached(target)
}

// reached reports whether the upstream received a request for target
// since Record.
func (t Target) reached(target string) bool {
	for _, s := range t.Upstream.Seen() {
		if s.Target == target {
			return true
		}
	}
	return false
}

// gateTransport: a pass earned over HTTP/3 (quic-go, Go's TLS), replayed
// over TCP from another address of the same /24 with another TLS stack,
// must be refused; it holds where it was earned.
func gateTransport(ctx context.Context, t GateTarget, out *GateOutcome) error {
	t.Upstream.Record(1000)
	earner := &visitor{t: t.Target, base: GateRequest{Proto: "h3", From: source(blockGateTransport, 0), Header: firefoxHeaders}}
	honest := out.Honest("the pass where it was earned (h3, the same client)", "200")
	if _, err := earner.earnPoW(ctx, "/gate/pass/earn-h3", 20); err != nil {
		honest.Add("h3", "no pass earned", true)
		honest.Note("%v", err)
		return nil
	}
	t.tryHonest(ctx, honest, earner, "/gate/pass/again-h3")
	chrome := utls.HelloChrome_133
	for i, th := range []struct {
		name string
		req  GateRequest
	}{
		{"utls Chrome 133", GateRequest{Proto: "h2", Parrot: &chrome, H2: &ChromeH2}},
		{"Go's crypto/tls", GateRequest{Proto: "h2"}},
		{"Go's crypto/tls", GateRequest{Proto: "h1"}},
	} {
		row := out.Attack(fmt.Sprintf("earned over h3, replayed over %s by %s from the same /24", th.req.Proto, th.name), "403, a challenge")
		thief := &visitor{t: t.Target, base: th.req, cookie: earner.cookie}
		thief.base.From, thief.base.Header = source(blockGateTransport, 1+i), firefoxHeaders
		target := fmt.Sprintf("/gate/pass/stolen-%d", i)
		t.tryPass(ctx, row, thief, target)
		t.noteFamilies(ctx, row, "/gate/pass/again-h3", target)
	}

	// The binding over TCP alone, which held before issue 33.
	tcp := out.Attack("earned over h2 by Go's TLS, replayed over h2 by utls Chrome 133 from the same /24", "403, a challenge")
	owner := &visitor{t: t.Target, base: GateRequest{Proto: "h2", From: source(blockGateTransport, 10), Header: firefoxHeaders}}
	if _, err := owner.earnPoW(ctx, "/gate/pass/earn-h2", 20); err != nil {
		tcp.Note("no pass earned: %v", err)
		return nil
	}
	thief := &visitor{t: t.Target, base: GateRequest{Proto: "h2", From: source(blockGateTransport, 11), Parrot: &chrome,
		H2: &ChromeH2, Header: firefoxHeaders}, cookie: owner.cookie}
	t.tryPass(ctx, tcp, thief, "/gate/pass/stolen-tcp")
	return nil
}

// noteFamilies notes the client families the fingerprint log gives the
// requests for the owner's path and the thief's.
func (t GateTarget) noteFamilies(ctx context.Context, row *GateRow, owner, thief string) {
	o, err1 := fpLine(ctx, t.FPLog, owner)
	th, err2 := fpLine(ctx, t.FPLog, thief)
	if err1 != nil || err2 != nil {
		return
	}
	row.Note("families: %s (%s) earned, %s (%s) replayed", orDash(o.Str("client_family")), o.Str("ja4"),
		orDash(th.Str("client_family")), th.Str("ja4"))
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// gateResume: an honest client (Go's TLS, which resumes its sessions)
// earns a pass and goes on over new connections that resume the session
// (a resumed ClientHello has another JA4: pre_shared_key counts); the
// pass must hold. A refusal locks people out: the row is an honest one.
func gateResume(ctx context.Context, t GateTarget, out *GateOutcome) error {
	t.Upstream.Record(1000)
	for i, proto := range []string{"h1", "h2", "h3"} {
		row := out.Honest("earn a pass, then use it on resumed TLS sessions ("+proto+")", "303 with the pass, then 200")
		v := &visitor{t: t.Target, base: GateRequest{Proto: proto, From: source(blockGateResume, i),
			Sessions: tls.NewLRUClientSessionCache(4), Header: [][2]string{{"User-Agent", "Go-http-client/2.0"}}}}
		// The first request's connection is a full handshake, whose
		// session the next ones resume: the redemption's and the visit's.
		a, err := v.get(ctx, "/gate/pass/resume-"+proto)
		if err != nil {
			row.Add(proto, gateErrKind(err), true)
			continue
		}
		n, err := parseChallenge(a.Body).solve(ctx, 20)
		if err != nil {
			row.Note("no proof of work to solve (%d): %v", a.Status, err)
			continue
		}
		if a, err = v.get(ctx, parseChallenge(a.Body).pass+"&n="+n); err != nil {
			row.Add(proto, gateErrKind(err), true)
			continue
		}
		if !a.Resumed {
			row.Note("the redemption's session was not resumed: nothing tried")
			continue
		}
		row.Add(proto, "redeemed "+a.kind(), a.Status != 303 || v.cookie == "")
		if v.cookie == "" {
			continue
		}
		target := "/gate/pass/resumed-" + proto
		switch a, err := v.get(ctx, target); {
		case err != nil:
			row.Add(proto, gateErrKind(err), true)
		case !a.Resumed:
			row.Note("the visit's session was not resumed")
		default:
			row.Add(proto, "visit "+a.kind(), !t.passed(a, target))
		}
	}
	return nil
}
