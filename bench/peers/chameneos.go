// chameneos.go - the Go peer for `schedbench chameneos`: a mall goroutine
// pairs N chameneo goroutines for MEETINGS meetings; each then reports its
// count, which must add up to 2*MEETINGS. Mailboxes are buffered channels.
// Args: MEETINGS N. Prints ms.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

type request struct {
	color uint64
	reply chan uint64 // the partner's colour, or stop (4)
}

const stop = 4

func chameneo(color uint64, mall chan request, report chan uint64) {
	reply := make(chan uint64, 1)
	meetings := uint64(0)
	for {
		mall <- request{color, reply}
		other := <-reply
		if other == stop {
			report <- meetings
			return
		}
		if color != other {
			color = 3 - color - other
		}
		meetings++
	}
}

func main() {
	target, _ := strconv.ParseUint(os.Args[1], 10, 64)
	n, _ := strconv.Atoi(os.Args[2])
	start := time.Now()
	mall := make(chan request, n)
	report := make(chan uint64, n)
	for i := 0; i < n; i++ {
		go chameneo(uint64(i%3), mall, report)
	}
	var waiting *request
	done := uint64(0)
	for stopped := 0; stopped < n; {
		r := <-mall
		if done >= target {
			r.reply <- stop
			stopped++
		} else if waiting == nil {
			waiting = &r
		} else {
			waiting.reply <- r.color
			r.reply <- waiting.color
			waiting = nil
			done++
		}
	}
	sum := uint64(0)
	for i := 0; i < n; i++ {
		sum += <-report
	}
	took := time.Since(start)
	if sum != 2*target {
		fmt.Fprintf(os.Stderr, "chameneos-go: %d meetings counted\n", sum)
		os.Exit(1)
	}
	fmt.Printf("%.1f\n", float64(took.Microseconds())/1000)
}
