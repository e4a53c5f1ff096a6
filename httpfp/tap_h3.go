package httpfp

import (
	"context"
	"hash/maphash"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// Tracer is the type of quic.Config.Tracer.
type Tracer = func(ctx context.Context, isClient bool, connID quic.ConnectionID) qlogwriter.Trace

// H3Tracer returns a quic.Config.Tracer that fingerprints the requests of
// every HTTP/3 connection from quic-go's own qlog events: http3.Server
// reports each HEADERS frame it parsed, with the QPACK-decoded fields in
// wire order, before it calls the handler. next, if not nil, is the tracer
// that was there before (a qlog writer, say); its traces get every event.
// Pair it with NewH3Context in http3.Server.ConnContext.
//
// The cost: with a trace, quic-go builds an event for every packet and
// frame, which the fingerprinting recorder drops at once (next, if set,
// still gets them).
func H3Tracer(cfg Config, next Tracer) Tracer {
	return func(ctx context.Context, isClient bool, connID quic.ConnectionID) qlogwriter.Trace {
		t := &h3Trace{c: &Conn{proto: H3, seed: maphash.MakeSeed(), budget: 2 * cfg.maxHeaderBytes()}, ja4h: cfg.JA4H, max: cfg.maxHeaderBytes()}
		if next != nil {
			t.next = next(ctx, isClient, connID)
		}
		t.client = isClient
		return t
	}
}

// NewH3Context returns a copy of ctx that carries the fingerprints of the
// HTTP/3 connection qc, for http3.Server.ConnContext. Without H3Tracer in
// qc's quic.Config it returns ctx: use NewH3Fingerprint then.
func NewH3Context(ctx context.Context, qc *quic.Conn) context.Context {
	if t, ok := qc.QlogTrace().(*h3Trace); ok {
		return NewContext(ctx, t.c)
	}
	return ctx
}

// h3Trace is the qlog trace of one QUIC connection.
type h3Trace struct {
	c      *Conn // only its queue is used: there is no net.Conn under it
	ja4h   bool
	max    int
	client bool // a client's trace: nothing to fingerprint
	next   qlogwriter.Trace
}

// AddProducer returns a recorder for one of quic-go's event producers.
func (t *h3Trace) AddProducer() qlogwriter.Recorder {
	r := &h3Recorder{t: t}
	if t.next != nil {
		r.next = t.next.AddProducer()
	}
	return r
}

// h3Recorder receives the events of one producer; quic-go calls it from
// the goroutine of each request stream.
type h3Recorder struct {
	t    *h3Trace
	next qlogwriter.Recorder
}

// RecordEvent fingerprints a request's HEADERS frame and passes every
// event on.
func (r *h3Recorder) RecordEvent(e qlogwriter.Event) {
	if p, ok := e.(qlog.FrameParsed); ok && !r.t.client {
		// Client-initiated bidirectional streams carry requests (RFC 9000,
		// section 2.1; RFC 9114, section 6.1).
		if h, ok := p.Frame.Frame.(qlog.HeadersFrame); ok && p.StreamID%4 == 0 {
			r.t.headers(h.HeaderFields)
		}
	}
	if r.next != nil {
		r.next.RecordEvent(e)
	}
}

// Close closes the next recorder, if any.
func (r *h3Recorder) Close() error {
	if r.next != nil {
		return r.next.Close()
	}
	return nil
}

// headers queues the fingerprint of a request's field section. Trailers
// (no :method) and sections over the size limit are left out.
func (t *h3Trace) headers(hfs []qlog.HeaderField) {
	f := fields{seed: t.c.seed}
	size := 0
	for _, hf := range hfs {
		if hf.InvalidName || hf.InvalidValue {
			return // quic-go rejects the request
		}
		if size += len(hf.Name) + len(hf.Value) + 32; size > t.max {
			return
		}
		f.add(hf.Name, hf.Value, t.ja4h)
	}
	if f.method == "" {
		return
	}
	var m memo
	t.c.push(f.pending(H3, t.ja4h, "", &m))
}
