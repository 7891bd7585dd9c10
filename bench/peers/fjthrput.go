// fjthrput.go - the Go peer for `schedbench fjthrput`: one producer sends
// MSGS numbers to each of N goroutines round robin (buffered channels of
// 1024 as mailboxes); each sums mix() of its numbers. Args: MSGS N.
// Prints ms.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func mix(v uint64) uint64 {
	v ^= v >> 31
	v *= 0x7fb5d329728ea185
	v ^= v >> 27
	return v
}

func main() {
	msgs, _ := strconv.ParseUint(os.Args[1], 10, 64)
	n, _ := strconv.Atoi(os.Args[2])
	start := time.Now()
	report := make(chan uint64, n)
	boxes := make([]chan uint64, n)
	for i := range boxes {
		boxes[i] = make(chan uint64, 1024)
		go func(in chan uint64) {
			acc := uint64(0)
			for k := uint64(0); k < msgs; k++ {
				acc += mix(<-in)
			}
			report <- acc
		}(boxes[i])
	}
	for j := uint64(0); j < msgs; j++ {
		for _, b := range boxes {
			b <- j
		}
	}
	sum := uint64(0)
	for i := 0; i < n; i++ {
		sum += <-report
	}
	took := time.Since(start)
	want := uint64(0)
	for j := uint64(0); j < msgs; j++ {
		want += mix(j)
	}
	if sum != want*uint64(n) {
		fmt.Fprintf(os.Stderr, "fjthrput-go: wrong sum\n")
		os.Exit(1)
	}
	fmt.Printf("%.1f\n", float64(took.Microseconds())/1000)
}
