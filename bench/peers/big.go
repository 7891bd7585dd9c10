// big.go - the Go peer for `schedbench big`: N goroutines each ping a
// random other one PINGS times, one at a time, and answer every ping with
// a pong; the pings answered must add up to PINGS*N. Mailboxes are
// buffered channels large enough never to block. Args: PINGS N. Prints ms.
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

const (
	ping = iota
	pong
	stop
)

type msg struct {
	kind int
	from int
}

func member(idx int, pings uint64, boxes []chan msg, done *sync.WaitGroup, answered *uint64) {
	rng := uint64(0x9e3779b97f4a7c15) ^ (uint64(idx+1) * 0x2545f4914f6cdd1d)
	n := uint64(len(boxes))
	send := func() {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		r := rng % (n - 1)
		if r >= uint64(idx) {
			r++
		}
		boxes[r] <- msg{ping, idx}
	}
	send()
	for m := range boxes[idx] {
		switch m.kind {
		case ping:
			*answered++
			boxes[m.from] <- msg{pong, idx}
		case pong:
			if pings--; pings > 0 {
				send()
			} else {
				done.Done()
			}
		case stop:
			return
		}
	}
}

func main() {
	pings, _ := strconv.ParseUint(os.Args[1], 10, 64)
	n, _ := strconv.Atoi(os.Args[2])
	start := time.Now()
	boxes := make([]chan msg, n)
	for i := range boxes {
		boxes[i] = make(chan msg, n+2)
	}
	answered := make([]uint64, n)
	var done, ended sync.WaitGroup
	done.Add(n)
	ended.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			member(i, pings, boxes, &done, &answered[i])
			ended.Done()
		}(i)
	}
	done.Wait()
	for i := range boxes {
		boxes[i] <- msg{stop, -1}
	}
	ended.Wait()
	sum := uint64(0)
	for _, a := range answered {
		sum += a
	}
	took := time.Since(start)
	if sum != pings*uint64(n) {
		fmt.Fprintf(os.Stderr, "big-go: %d pings answered\n", sum)
		os.Exit(1)
	}
	fmt.Printf("%.1f\n", float64(took.Microseconds())/1000)
}
