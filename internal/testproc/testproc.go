// Package testproc reads what the benchmarks under bench/ measure of the
// processes they drive, from Linux's /proc: CPU time, resident memory,
// children, the load average. It is test and benchmark support; the
// binary never imports it.
package testproc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is Linux's USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat: 100 on every architecture Go supports on Linux.
const clockTick = 100

var errStat = errors.New("testproc: unreadable /proc stat line")

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

// CPUOf returns the CPU time (user and system) a process has used.
func CPUOf(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return CPUFromStat(b)
}

// CPUFromStat reads utime and stime (fields 14 and 15 of proc(5)).
func CPUFromStat(line []byte) (time.Duration, error) {
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

// Children returns the processes whose parent is pid (nginx's workers).
func Children(pid int) []int {
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

// Family is a process and its children: nginx's master and workers, or
// one Go process.
func Family(pid int) []int { return append([]int{pid}, Children(pid)...) }

// CPUTotal is the CPU time of a process family.
func CPUTotal(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, p := range pids {
		d, err := CPUOf(p)
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// RSSTotal is the resident memory of a process family, in bytes (VmRSS).
func RSSTotal(pids []int) (int64, error) {
	var sum int64
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			return 0, err
		}
		kb, err := VmRSS(b)
		if err != nil {
			return 0, err
		}
		sum += kb << 10
	}
	return sum, nil
}

// VmRSS reads the VmRSS line of /proc/<pid>/status, in KiB.
func VmRSS(status []byte) (int64, error) {
	for line := range bytes.SplitSeq(status, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := strings.Fields(string(rest))
		if len(f) != 2 || f[1] != "kB" {
			break
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, errors.New("testproc: no VmRSS in /proc status")
}

// LoadAvg is the first three fields of /proc/loadavg.
func LoadAvg() string {
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
