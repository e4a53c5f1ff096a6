package challenge

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"compress/flate"
)

// A skeleton's pages are gzipped without compressing anything per request.
// Each chunk of the skeleton is compressed once, on its own, into raw
// DEFLATE that ends on a byte boundary (a sync flush); a request's page is
// then the gzip header, the compressed chunks with the escaped fields
// between them as stored blocks (RFC 1951 §3.2.4), and the trailer with the
// CRC-32 and length of the whole page (RFC 1952 §2.3). No chunk refers back
// past its own start, so the fields, whose lengths vary, never shift a
// distance. This is what keeps a challenge page under flood at about the
// cost of serving fixed bytes: compressing the page per response was most
// of its CPU.

// gzipHeader is a gzip member header: DEFLATE, no flags, no time, OS
// unknown.
var gzipHeader = [10]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}

// compressChunks compresses each chunk as described above: all but the last
// end with a sync flush, the last with the final block.
func compressChunks(chunks []string) ([][]byte, error) {
	out := make([][]byte, len(chunks))
	for i, ch := range chunks {
		var b bytes.Buffer
		fw, err := flate.NewWriter(&b, flate.BestCompression)
		if err != nil {
			return nil, err
		}
		if _, err := fw.Write([]byte(ch)); err != nil {
			return nil, err
		}
		if i < len(chunks)-1 {
			err = fw.Flush()
		} else {
			err = fw.Close()
		}
		if err != nil {
			return nil, err
		}
		out[i] = b.Bytes()
	}
	return out, nil
}

// appendGzip appends the gzip form of page to dst. page is the skeleton's
// chunks with the fields between them; fields holds the start and end of
// each field in page, in order.
func (sk *skeleton) appendGzip(dst, page []byte, fields []int) []byte {
	dst = append(dst, gzipHeader[:]...)
	for i := range sk.slots {
		dst = append(dst, sk.gz[i]...)
		dst = appendStored(dst, page[fields[2*i]:fields[2*i+1]])
	}
	dst = append(dst, sk.gz[len(sk.gz)-1]...)
	dst = binary.LittleEndian.AppendUint32(dst, crc32.ChecksumIEEE(page))
	return binary.LittleEndian.AppendUint32(dst, uint32(len(page)))
}

// appendStored appends b as non-final stored DEFLATE blocks, starting on a
// byte boundary.
func appendStored(dst, b []byte) []byte {
	for len(b) > 0 {
		n := min(len(b), 0xffff)
		dst = append(dst, 0, byte(n), byte(n>>8), ^byte(n), ^byte(n>>8))
		dst = append(dst, b[:n]...)
		b = b[n:]
	}
	return dst
}
