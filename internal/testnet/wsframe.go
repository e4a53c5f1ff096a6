package testnet

import "encoding/binary"

// WSFrame builds a websocket frame (RFC 6455, section 5.2): FIN, opcode
// op, the payload, masked with key when key is not nil (a client's frame).
func WSFrame(op byte, payload []byte, key []byte) []byte {
	b := []byte{0x80 | op}
	m := byte(0)
	if key != nil {
		m = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		b = append(b, m|byte(n))
	case n <= 0xffff:
		b = append(b, m|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if key == nil {
		return append(b, payload...)
	}
	b = append(b, key...)
	for i, c := range payload {
		b = append(b, c^key[i%4])
	}
	return b
}
