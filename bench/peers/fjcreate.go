// fjcreate.go - the Go peer for `schedbench fjcreate`: N goroutines
// created, each sends mix() of its number back and ends; the sum must
// match. Args: N 0. Prints ms.
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
	n, _ := strconv.ParseUint(os.Args[1], 10, 64)
	start := time.Now()
	results := make(chan uint64, 1024)
	go func() {
		for i := uint64(0); i < n; i++ {
			go func(v uint64) { results <- mix(v) }(i)
		}
	}()
	sum := uint64(0)
	for i := uint64(0); i < n; i++ {
		sum += <-results
	}
	took := time.Since(start)
	want := uint64(0)
	for i := uint64(0); i < n; i++ {
		want += mix(i)
	}
	if sum != want {
		fmt.Fprintf(os.Stderr, "fjcreate-go: wrong sum\n")
		os.Exit(1)
	}
	fmt.Printf("%.1f\n", float64(took.Microseconds())/1000)
}
