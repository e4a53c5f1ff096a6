package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
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

// procCPU is process pid's CPU time so far (Linux's /proc/PID/stat, in
// ticks of 1/100 s); 0 where /proc does not tell.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
