package testproc

import (
	"testing"
	"time"
)

func TestProcFields(t *testing.T) {
	t.Parallel()
	// A command name with a space and a parenthesis, as proc(5) allows.
	stat := "4242 (a) b) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 100 1000 10 0\n"
	cpu, err := CPUFromStat([]byte(stat))
	if err != nil || cpu != 3250*time.Millisecond {
		t.Errorf("CPUFromStat = %v, %v; want 3.25s", cpu, err)
	}
	if _, err := CPUFromStat([]byte("4242 (a) S 1")); err == nil {
		t.Error("a short stat line was read")
	}
	kb, err := VmRSS([]byte("Name:\tnginx\nVmPeak:\t 9000 kB\nVmRSS:\t    5120 kB\nThreads:\t1\n"))
	if err != nil || kb != 5120 {
		t.Errorf("VmRSS = %d, %v; want 5120", kb, err)
	}
	if _, err := VmRSS([]byte("Name:\tx\n")); err == nil {
		t.Error("a status without VmRSS was read")
	}
}
