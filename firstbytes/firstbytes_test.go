package firstbytes

import (
	"net"
	"testing"
	"time"
)

// recConn records the read deadline set on it.
type recConn struct {
	net.Conn
	read, write time.Time
}

func (c *recConn) SetReadDeadline(t time.Time) error  { c.read = t; return nil }
func (c *recConn) SetWriteDeadline(t time.Time) error { c.write = t; return nil }

func TestDeadline(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name string
		run  func(d *Deadline, c *recConn)
		want time.Time
	}{
		{"lead-in alone", func(d *Deadline, c *recConn) { d.Begin(c, at(10)) }, at(10)},
		{"owner earlier before", func(d *Deadline, c *recConn) { _ = d.SetReadDeadline(c, at(5)); d.Begin(c, at(10)) }, at(5)},
		{"owner later before", func(d *Deadline, c *recConn) { _ = d.SetReadDeadline(c, at(30)); d.Begin(c, at(10)) }, at(10)},
		{"owner earlier during", func(d *Deadline, c *recConn) { d.Begin(c, at(10)); _ = d.SetReadDeadline(c, at(5)) }, at(5)},
		{"owner later during", func(d *Deadline, c *recConn) { d.Begin(c, at(10)); _ = d.SetReadDeadline(c, at(30)) }, at(10)},
		{"owner none during", func(d *Deadline, c *recConn) { d.Begin(c, at(10)); _ = d.SetReadDeadline(c, time.Time{}) }, at(10)},
		{"end restores owner", func(d *Deadline, c *recConn) {
			_ = d.SetReadDeadline(c, at(30))
			d.Begin(c, at(10))
			d.End(c)
		}, at(30)},
		{"end restores none", func(d *Deadline, c *recConn) { d.Begin(c, at(10)); d.End(c) }, time.Time{}},
		{"owner set during, after end", func(d *Deadline, c *recConn) {
			d.Begin(c, at(10))
			_ = d.SetReadDeadline(c, at(30))
			d.End(c)
		}, at(30)},
		{"after end the owner's alone", func(d *Deadline, c *recConn) {
			d.Begin(c, at(10))
			d.End(c)
			_ = d.SetReadDeadline(c, at(30))
		}, at(30)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var d Deadline
			c := &recConn{}
			tt.run(&d, c)
			if !c.read.Equal(tt.want) {
				t.Errorf("read deadline %v, want %v", c.read, tt.want)
			}
		})
	}
}

func TestSetDeadlineSetsWrite(t *testing.T) {
	t.Parallel()
	var d Deadline
	c := &recConn{}
	now := time.Now()
	d.Begin(c, now.Add(time.Second))
	if err := d.SetDeadline(c, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if !c.write.Equal(now.Add(time.Minute)) || !c.read.Equal(now.Add(time.Second)) {
		t.Errorf("read %v write %v: want the lead-in's read deadline and the owner's write deadline", c.read, c.write)
	}
}

// A real socket times out at the earlier deadline while the lead-in is
// read.
func TestDeadlineOnPipe(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var d Deadline
	d.Begin(a, time.Now().Add(time.Hour))
	_ = d.SetReadDeadline(a, time.Now().Add(-time.Second)) // already passed
	if _, err := a.Read(make([]byte, 1)); err == nil {
		t.Fatal("read succeeded past the owner's deadline")
	}
}
