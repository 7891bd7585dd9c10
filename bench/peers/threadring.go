// threadring.go - the Go peer for `schedbench threadring`: N goroutines in
// a ring (one unbuffered channel each) pass a token HOPS times; the one
// that gets it at 0 must be HOPS mod N. Args: HOPS N. Prints ms.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	hops, _ := strconv.ParseUint(os.Args[1], 10, 64)
	n, _ := strconv.Atoi(os.Args[2])
	start := time.Now()
	ring := make([]chan uint64, n)
	for i := range ring {
		ring[i] = make(chan uint64)
	}
	end := make(chan int)
	for i := 0; i < n; i++ {
		go func(i int, in, next chan uint64) {
			for v := range in {
				if v == 0 {
					end <- i
					return
				}
				next <- v - 1
			}
		}(i, ring[i], ring[(i+1)%n])
	}
	ring[0] <- hops
	last := <-end
	took := time.Since(start)
	if uint64(last) != hops%uint64(n) {
		fmt.Fprintf(os.Stderr, "threadring-go: wrong index %d\n", last)
		os.Exit(1)
	}
	fmt.Printf("%.1f\n", float64(took.Microseconds())/1000)
}
