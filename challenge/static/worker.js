// Maat proof-of-work worker: finds n such that SHA-256(seed ‖ w0 ‖ n) starts
// with `bits` zero bits. The seed is exactly one 64-byte block, so its
// compression (the midstate) is computed once; each nonce costs one
// compression of the constant-padded second block.
'use strict';
var K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2]);
var W = new Int32Array(64);
var mid = new Int32Array(8);

// compress runs the SHA-256 compression of W (words 0..15 set) on st.
function compress(st) {
  var t, x, y;
  for (t = 16; t < 64; t++) {
    x = W[t - 15]; y = W[t - 2];
    W[t] = ((((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10)) + W[t - 7] +
      (((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3)) + W[t - 16]) | 0;
  }
  var a = st[0], b = st[1], c = st[2], d = st[3], e = st[4], f = st[5], g = st[6], h = st[7], t1, t2;
  for (t = 0; t < 64; t++) {
    t1 = (h + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))) +
      ((e & f) ^ (~e & g)) + K[t] + W[t]) | 0;
    t2 = ((((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) +
      ((a & b) ^ (a & c) ^ (b & c))) | 0;
    h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
  }
  st[0] = (st[0] + a) | 0; st[1] = (st[1] + b) | 0; st[2] = (st[2] + c) | 0; st[3] = (st[3] + d) | 0;
  st[4] = (st[4] + e) | 0; st[5] = (st[5] + f) | 0; st[6] = (st[6] + g) | 0; st[7] = (st[7] + h) | 0;
}

function init(seed) {
  var iv = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
  for (var i = 0; i < 8; i++) mid[i] = iv[i];
  for (i = 0; i < 16; i++) {
    W[i] = (seed.charCodeAt(4 * i) << 24) | (seed.charCodeAt(4 * i + 1) << 16) |
      (seed.charCodeAt(4 * i + 2) << 8) | seed.charCodeAt(4 * i + 3);
  }
  compress(mid);
}

// search tries n in [start, start+count) and returns the first that works,
// or -1. Only the first output word is needed for bits ≤ 32.
function search(w0, start, count, bits) {
  if (bits <= 0) return start;
  var shift = 32 - bits, m0 = mid[0], m1 = mid[1], m2 = mid[2], m3 = mid[3],
    m4 = mid[4], m5 = mid[5], m6 = mid[6], m7 = mid[7];
  var t, x, y, a, b, c, d, e, f, g, h, t1, t2, n, end = start + count;
  for (n = start; n < end; n++) {
    W[0] = w0; W[1] = n | 0; W[2] = 0x80000000 | 0;
    for (t = 3; t < 15; t++) W[t] = 0;
    W[15] = 576;
    for (t = 16; t < 64; t++) {
      x = W[t - 15]; y = W[t - 2];
      W[t] = ((((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10)) + W[t - 7] +
        (((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3)) + W[t - 16]) | 0;
    }
    a = m0; b = m1; c = m2; d = m3; e = m4; f = m5; g = m6; h = m7;
    for (t = 0; t < 64; t++) {
      t1 = (h + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))) +
        ((e & f) ^ (~e & g)) + K[t] + W[t]) | 0;
      t2 = ((((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) +
        ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    if (((a + m0) >>> shift) === 0) return n;
  }
  return -1;
}

onmessage = function (ev) {
  var m = ev.data;
  if (m.seed) { init(m.seed); return; }
  var n = search(m.w0, m.start, m.count, m.bits);
  postMessage({ id: m.id, puzzle: m.puzzle, n: n, count: n < 0 ? m.count : n - m.start + 1 });
};
