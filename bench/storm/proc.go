package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is Linux's USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat: 100 on every architecture Go supports on Linux.
const clockTick = 100

var errStat = errors.New("storm: unreadable /proc stat line")

// statFields returns the fields of a /proc/<pid>/stat line after the
// command name (which may hold spaces and parentheses): field 3 of
// proc(5) is index 0.
func statFields(line []byte) ([]string, error) {
	i := bytes.LastIndexByte(line, ')')
	if i < 0 || i+2 > len(line) {
		return nil, errStat
	}
	f := strings.Fields(string(line[i+2:]))
	if len(f) < 22 {
		return nil, errStat
	}
	return f, nil
}

// cpuOf returns the CPU time (user and system) a process has used.
func cpuOf(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return cpuFromStat(b)
}

// cpuFromStat reads utime and stime (fields 14 and 15 of proc(5)).
func cpuFromStat(line []byte) (time.Duration, error) {
	f, err := statFields(line)
	if err != nil {
		return 0, err
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errStat
	}
	return time.Duration(ut+st) * time.Second / clockTick, nil
}

// children returns the processes whose parent is pid (nginx's workers).
func children(pid int) []int {
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f, err := statFields(b)
		if err != nil {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out = append(out, child)
		}
	}
	return out
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

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
