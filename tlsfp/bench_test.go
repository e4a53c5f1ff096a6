package tlsfp

import "testing"

// BenchmarkFingerprint measures parsing a Chrome ClientHello (vector 1,
// browsers-x509.pcapng, with GREASE) and computing all four JA4 variants.
// Budget: 2 µs and a handful of allocations.
func BenchmarkFingerprint(b *testing.B) {
	msg := loadVectors(b)[1].handshake
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		h, err := ParseHandshake(msg)
		if err != nil {
			b.Fatal(err)
		}
		if fp := h.Fingerprint(false); fp.JA4 == "" {
			b.Fatal("no JA4")
		}
	}
}

// BenchmarkParseRecords adds the record layer to BenchmarkFingerprint.
func BenchmarkParseRecords(b *testing.B) {
	rec := loadVectors(b)[1].records
	b.ReportAllocs()
	for b.Loop() {
		h, err := ParseRecords(rec)
		if err != nil {
			b.Fatal(err)
		}
		h.Fingerprint(false)
	}
}
