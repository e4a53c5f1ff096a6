//go:build unix

package fplog

import (
	"syscall"
	"testing"
	"time"
)

// benchPaced measures what a record costs the whole process, the writing
// goroutine's work and wake-ups included, at a pace a loaded edge keeps (a
// record every 20µs, the rest of a request's work stood in for by a busy
// wait): cpu-ns/op is the process's CPU time per record, the 20µs
// included, and dropped/op must stay 0.
func benchPaced(b *testing.B, write func()) {
	const pace = 20 * time.Microsecond
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	for b.Loop() {
		write()
		for start := time.Now(); time.Since(start) < pace; {
		}
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}
