package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// selfCPU is the CPU time of this process and of its children that have
// ended (the curl bots).
func selfCPU() time.Duration {
	var sum time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			sum += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return sum
}

// waitReading waits, up to limit, until process pid is blocked reading
// its standard input (Linux's /proc/PID/syscall: read, fd 0), for a curl
// bot's process to have done its start-up before the measured phases; at
// once where /proc does not tell.
func waitReading(pid int, limit time.Duration) {
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
		if err != nil {
			return
		}
		if f := strings.Fields(string(b)); len(f) >= 2 && f[0] == "0" && f[1] == "0x0" {
			return
		}
		time.Sleep(10 * time.Millisecond) // polling /proc: nothing to wait on
	}
}
