package fplog

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// ErrBadDuration is wrapped by the errors of ParseSince.
var ErrBadDuration = errors.New("fplog: bad duration")

// Units ParseSince adds to Go's.
const (
	day  = 24 * time.Hour
	week = 7 * day
)

// ParseSince parses how far back `edge fp top -since` looks: a Go duration
// (time.ParseDuration: "90m", "12h", "1h30m") in which days ("d", 24 hours)
// and weeks ("w", 7 days) may also be used, as in "1d", "2w" or "1d12h".
// Each number may have a decimal fraction ("1.5d"). "0" is zero: no limit.
// A sign, an unknown unit, a number without a unit, or more than about 290
// years (the range of a time.Duration) are errors wrapping ErrBadDuration.
func ParseSince(s string) (time.Duration, error) {
	bad := func(why string) (time.Duration, error) {
		return 0, fmt.Errorf("%w %q: %s; want a duration such as 90m, 12h, 1d or 2w", ErrBadDuration, s, why)
	}
	if s == "" {
		return bad("empty")
	}
	if s == "0" {
		return 0, nil
	}
	var total time.Duration
	for rest := s; rest != ""; {
		i := 0
		for i < len(rest) && isNumberByte(rest[i]) {
			i++
		}
		j := i
		for j < len(rest) && !isNumberByte(rest[j]) {
			j++
		}
		number, unit := rest[:i], rest[i:j]
		rest = rest[j:]
		if number == "" {
			return bad("no number before " + strconv.Quote(unit))
		}
		var d time.Duration
		switch unit {
		case "d", "w":
			n, err := strconv.ParseFloat(number, 64)
			size := float64(day)
			if unit == "w" {
				size = float64(week)
			}
			if err != nil {
				return bad("cannot read " + strconv.Quote(number+unit))
			}
			if n*size >= math.MaxInt64 {
				return bad("out of range")
			}
			d = time.Duration(n * size)
		case "":
			return bad("no unit after " + number)
		default:
			var err error
			if d, err = time.ParseDuration(number + unit); err != nil {
				return bad("cannot read " + strconv.Quote(number+unit))
			}
		}
		if total > math.MaxInt64-d {
			return bad("out of range")
		}
		total += d
	}
	return total, nil
}

// isNumberByte reports whether c can be part of a number of ParseSince.
func isNumberByte(c byte) bool { return '0' <= c && c <= '9' || c == '.' }
