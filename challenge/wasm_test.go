package challenge

import (
	"encoding/binary"
	"fmt"
)

// The worker's search also exists as a WebAssembly module (WebAssembly Core
// Specification 1.0, binary format §5): V8 compiles it in a millisecond with
// its baseline compiler and runs it at speed from the first nonce, where the
// JavaScript search spends its first hundreds of milliseconds in the
// interpreter until it is optimized, which is most of a low difficulty's
// time. genWasm writes it: the same computation as genSearch (constant
// schedule words folded, round 0 hoisted), with i32.rotr for the rotations.
//
// Exports: seed(w0…w15) compresses the seed block (the 64 ASCII bytes of
// the seed as big-endian words) into the midstate; setMid(m0…m7) sets the
// midstate directly; search(w0, start, count, bits) returns the index in
// [0, count) of the first nonce that works, or -1. It is served as
// static/search.wasm: the page compiles it once and hands the module to its
// workers.

// Opcodes (§5.4).
const (
	opBlock    = 0x02
	opLoop     = 0x03
	opIf       = 0x04
	opEnd      = 0x0b
	opBr       = 0x0c
	opBrIf     = 0x0d
	opReturn   = 0x0f
	opLocalGet = 0x20
	opLocalSet = 0x21
	opGlobGet  = 0x23
	opGlobSet  = 0x24
	opI32Const = 0x41
	opI32Eqz   = 0x45
	opI32Eq    = 0x46
	opI32LeS   = 0x4c
	opI32Add   = 0x6a
	opI32Sub   = 0x6b
	opI32And   = 0x71
	opI32Or    = 0x72
	opI32Xor   = 0x73
	opI32ShrU  = 0x76
	opI32Rotr  = 0x78
	typeI32    = 0x7f
	typeVoid   = 0x40
)

// wasmFunc builds a function body on the operand stack.
type wasmFunc struct {
	code   []byte
	locals map[string]uint32
	n      uint32 // locals, parameters included
}

func newWasmFunc(params ...string) *wasmFunc {
	f := &wasmFunc{locals: make(map[string]uint32)}
	for _, p := range params {
		f.local(p)
	}
	return f
}

// local returns the index of the named local, adding it on first use.
func (f *wasmFunc) local(name string) uint32 {
	if i, ok := f.locals[name]; ok {
		return i
	}
	f.locals[name] = f.n
	f.n++
	return f.n - 1
}

func (f *wasmFunc) op(ops ...byte) { f.code = append(f.code, ops...) }
func (f *wasmFunc) get(name string) {
	f.op(opLocalGet)
	f.code = binary.AppendUvarint(f.code, uint64(f.local(name)))
}
func (f *wasmFunc) set(name string) {
	f.op(opLocalSet)
	f.code = binary.AppendUvarint(f.code, uint64(f.local(name)))
}
func (f *wasmFunc) i32(v uint32) {
	f.op(opI32Const)
	f.code = appendSLEB(f.code, int64(int32(v)))
}

// rotx pushes rotr(x,r1) ^ rotr(x,r2) ^ (x op r3), op rotr or shr_u.
func (f *wasmFunc) rotx(x string, r1, r2, r3 uint32, last byte) {
	f.get(x)
	f.i32(r1)
	f.op(opI32Rotr)
	f.get(x)
	f.i32(r2)
	f.op(opI32Rotr, opI32Xor)
	f.get(x)
	f.i32(r3)
	f.op(last, opI32Xor)
}

// sum pushes the sum of the terms (each pushes one value) and c.
func (f *wasmFunc) sum(terms []func(), c uint32) {
	for i, t := range terms {
		t()
		if i > 0 {
			f.op(opI32Add)
		}
	}
	if c != 0 || len(terms) == 0 {
		f.i32(c)
		if len(terms) > 0 {
			f.op(opI32Add)
		}
	}
}

// round emits SHA-256 round t on the locals named by v (a…h) with the
// schedule word w, and returns the names after it, as genSearch's round.
func (f *wasmFunc) round(t int, v [8]string, w word) [8]string {
	a, b, c, d, e, ff, g, h := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
	// t1 = h + Σ1(e) + Ch(e, f, g) + K[t] + W[t]; Ch = g ^ (e & (f ^ g)).
	f.get(h)
	f.rotx(e, 6, 11, 25, opI32Rotr)
	f.op(opI32Add)
	f.get(g)
	f.get(e)
	f.get(ff)
	f.get(g)
	f.op(opI32Xor, opI32And, opI32Xor, opI32Add)
	if w.name == "" {
		f.i32(sha256K[t] + w.value)
	} else {
		f.i32(sha256K[t])
		f.op(opI32Add)
		f.get(w.name)
	}
	f.op(opI32Add)
	f.set("t1")
	// t2 = Σ0(a) + Maj(a, b, c); Maj = (a & b) | (c & (a | b)).
	f.rotx(a, 2, 13, 22, opI32Rotr)
	f.get(a)
	f.get(b)
	f.op(opI32And)
	f.get(c)
	f.get(a)
	f.get(b)
	f.op(opI32Or, opI32And, opI32Or, opI32Add)
	f.set("t2")
	f.get(d)
	f.get("t1")
	f.op(opI32Add)
	f.set(d)
	f.get("t1")
	f.get("t2")
	f.op(opI32Add)
	f.set(h)
	return [8]string{h, a, b, c, d, e, ff, g}
}

// schedule emits the message schedule w16…w63 into locals of those names,
// folding the constant words.
func (f *wasmFunc) schedule(w *[64]word) {
	for t := 16; t < 64; t++ {
		var terms []func()
		var c uint32
		add := func(x word, g func(uint32) uint32, r1, r2, r3 uint32) {
			switch {
			case x.name == "" && g != nil:
				c += g(x.value)
			case x.name == "":
				c += x.value
			case g != nil:
				terms = append(terms, func() { f.rotx(x.name, r1, r2, r3, opI32ShrU) })
			default:
				terms = append(terms, func() { f.get(x.name) })
			}
		}
		add(w[t-2], sigma1, 17, 19, 10)
		add(w[t-7], nil, 0, 0, 0)
		add(w[t-15], sigma0, 7, 18, 3)
		add(w[t-16], nil, 0, 0, 0)
		name := fmt.Sprintf("w%d", t)
		f.sum(terms, c)
		f.set(name)
		w[t] = word{name: name}
	}
}

// sha256IV is SHA-256's initial hash value (FIPS 180-4 §5.3.3).
var sha256IV = [8]uint32{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}

// genSeed is seed(w0…w15): the compression of one block from the IV, into
// the midstate globals.
func genSeed() []byte {
	var params []string
	var w [64]word
	for i := range 16 {
		params = append(params, fmt.Sprintf("w%d", i))
		w[i] = word{name: params[i]}
	}
	f := newWasmFunc(params...)
	f.schedule(&w)
	v := [8]string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for i := range v {
		f.i32(sha256IV[i])
		f.set(v[i])
	}
	for t := range 64 {
		v = f.round(t, v, w[t])
	}
	for i := range v {
		f.i32(sha256IV[i])
		f.get(v[i])
		f.op(opI32Add, opGlobSet, byte(i))
	}
	return f.body(16)
}

// genWasm returns the module's bytes.
func genWasm() []byte {
	// search(w0, start, count, bits)
	f := newWasmFunc("w0", "start", "count", "bits")
	var w [64]word
	w[0], w[1], w[2], w[15] = word{name: "w0"}, word{name: "n"}, word{value: 0x80000000}, word{value: 72 * 8}
	// if bits <= 0: return 0
	f.get("bits")
	f.i32(0)
	f.op(opI32LeS, opIf, typeVoid)
	f.i32(0)
	f.op(opReturn, opEnd)
	// shift = 32 - bits; m0 and the midstate from the globals.
	f.i32(32)
	f.get("bits")
	f.op(opI32Sub)
	f.set("shift")
	mid := [8]string{"pa", "pb", "pc", "pd", "pe", "pf", "pg", "ph"}
	for i, name := range mid {
		f.op(opGlobGet, byte(i))
		f.set(name)
	}
	f.get("pa")
	f.set("m0")
	pv := f.round(0, mid, w[0])
	// n = start; end = start + count
	f.get("start")
	f.set("n")
	f.get("start")
	f.get("count")
	f.op(opI32Add)
	f.set("end")
	f.op(opBlock, typeVoid, opLoop, typeVoid)
	f.get("n")
	f.get("end")
	f.op(opI32Eq, opBrIf, 1)
	f.schedule(&w)
	v := [8]string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for i := range v {
		f.get(pv[i])
		f.set(v[i])
	}
	for t := 1; t < 64; t++ {
		v = f.round(t, v, w[t])
	}
	// if ((a + m0) >>> shift) == 0: return n - start
	f.get(v[0])
	f.get("m0")
	f.op(opI32Add)
	f.get("shift")
	f.op(opI32ShrU, opI32Eqz, opIf, typeVoid)
	f.get("n")
	f.get("start")
	f.op(opI32Sub, opReturn, opEnd)
	f.get("n")
	f.i32(1)
	f.op(opI32Add)
	f.set("n")
	f.op(opBr, 0, opEnd, opEnd)
	f.i32(0xffffffff)
	search := f.body(4)

	// setMid(m0…m7)
	g := newWasmFunc("m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7")
	for i := range 8 {
		g.get(fmt.Sprintf("m%d", i))
		g.op(opGlobSet, byte(i))
	}
	setMid := g.body(8)

	return wasmModule(search, setMid, genSeed())
}

// wasmModule assembles the module (§5.5) from the bodies of search, setMid
// and seed.
func wasmModule(search, setMid, seed []byte) []byte {
	var m []byte
	m = append(m, 0, 'a', 's', 'm', 1, 0, 0, 0)
	section := func(id byte, items ...[]byte) {
		var s []byte
		s = binary.AppendUvarint(s, uint64(len(items)))
		for _, it := range items {
			s = append(s, it...)
		}
		m = append(m, id)
		m = binary.AppendUvarint(m, uint64(len(s)))
		m = append(m, s...)
	}
	functype := func(params, results int) []byte {
		b := []byte{0x60, byte(params)}
		for range params {
			b = append(b, typeI32)
		}
		b = append(b, byte(results))
		for range results {
			b = append(b, typeI32)
		}
		return b
	}
	name := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	global := []byte{typeI32, 1, opI32Const, 0, opEnd}
	section(1, functype(4, 1), functype(8, 0), functype(16, 0))                                        // types
	section(3, []byte{0}, []byte{1}, []byte{2})                                                        // functions
	section(6, global, global, global, global, global, global, global, global)                         // globals
	section(7, append(name("search"), 0, 0), append(name("setMid"), 0, 1), append(name("seed"), 0, 2)) // exports
	section(10, search, setMid, genSeed())                                                             // code
	return m
}

// body is the function's code entry: its size, its locals beyond the
// params (all i32), the code and the end.
func (f *wasmFunc) body(params uint32) []byte {
	var b []byte
	if extra := f.n - params; extra > 0 {
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(extra))
		b = append(b, typeI32)
	} else {
		b = append(b, 0)
	}
	b = append(b, f.code...)
	b = append(b, opEnd)
	return append(binary.AppendUvarint(nil, uint64(len(b))), b...)
}

// appendSLEB appends v in signed LEB128 (§5.2.2).
func appendSLEB(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
