// Command timewindow answers, with kured 1.23.0's own pkg/timewindow, whether instants fall inside reboot
// windows. It is the oracle of pykured's window tests (tests/policy/test_weekly_kured.py); build it with
// `tools/kured-build timewindow`.
//
// Protocol: one case per line on stdin, fields separated by tabs:
//
//	DAYS  START  END  ZONE  INSTANT
//
// DAYS is the --reboot-days list joined with "|" ("" = no element), START/END/ZONE are the flag values, and
// INSTANT is "SECONDS.NANOS" since the Unix epoch, or "-" to ask for the window's String(). One answer line
// per case, in order: "1" (inside) or "0" (outside), "S <String()>", or "E <timewindow.New error>".
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kubereboot/kured/pkg/timewindow"
)

type built struct {
	window *timewindow.TimeWindow
	err    error
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer func() { _ = out.Flush() }()
	cache := map[string]built{}
	for in.Scan() {
		fields := strings.Split(in.Text(), "\t")
		if len(fields) != 5 {
			fmt.Fprintf(os.Stderr, "timewindow: want 5 tab-separated fields, got %d: %q\n", len(fields), in.Text())
			os.Exit(2)
		}
		key := strings.Join(fields[:4], "\t")
		b, ok := cache[key]
		if !ok {
			var days []string
			if fields[0] != "" {
				days = strings.Split(fields[0], "|")
			}
			b.window, b.err = timewindow.New(days, fields[1], fields[2], fields[3])
			cache[key] = b
		}
		switch {
		case b.err != nil:
			fmt.Fprintf(out, "E %s\n", b.err)
		case fields[4] == "-":
			fmt.Fprintf(out, "S %s\n", b.window)
		default:
			instant, err := parseInstant(fields[4])
			if err != nil {
				fmt.Fprintf(os.Stderr, "timewindow: bad instant %q: %v\n", fields[4], err)
				os.Exit(2)
			}
			if b.window.Contains(instant) {
				fmt.Fprintln(out, "1")
			} else {
				fmt.Fprintln(out, "0")
			}
		}
		if len(cache) > 100000 {
			cache = map[string]built{}
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "timewindow: %v\n", err)
		os.Exit(2)
	}
}

func parseInstant(text string) (time.Time, error) {
	secText, nanoText, _ := strings.Cut(text, ".")
	sec, err := strconv.ParseInt(secText, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	var nanos int64
	if nanoText != "" {
		if nanos, err = strconv.ParseInt(nanoText, 10, 64); err != nil {
			return time.Time{}, err
		}
	}
	return time.Unix(sec, nanos), nil
}
