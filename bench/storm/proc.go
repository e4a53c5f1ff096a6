package main

import (
	"os"
	"syscall"
	"time"
)

func hostName() (string, error) { return os.Hostname() }

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
