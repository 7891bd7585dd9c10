// pipeline.go - the Go peer for `schedbench pipeline`: ITEMS numbers
// through STAGES goroutines (buffered channels of 1024 between them);
// stage k maps v to 3v+k, the last one sums. Args: ITEMS STAGES. Prints ms.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	items, _ := strconv.ParseUint(os.Args[1], 10, 64)
	stages, _ := strconv.ParseUint(os.Args[2], 10, 64)
	start := time.Now()
	first := make(chan uint64, 1024)
	in := first
	for k := uint64(1); k < stages; k++ {
		out := make(chan uint64, 1024)
		go func(k uint64, in, out chan uint64) {
			for v := range in {
				out <- v*3 + k
			}
			close(out)
		}(k, in, out)
		in = out
	}
	result := make(chan uint64)
	go func(in chan uint64) {
		sum := uint64(0)
		for v := range in {
			sum += v*3 + stages
		}
		result <- sum
	}(in)
	for i := uint64(0); i < items; i++ {
		first <- i
	}
	close(first)
	sum := <-result
	took := time.Since(start)
	want := uint64(0)
	for i := uint64(0); i < items; i++ {
		v := i
		for k := uint64(1); k <= stages; k++ {
			v = v*3 + k
		}
		want += v
	}
	if sum != want {
		fmt.Fprintf(os.Stderr, "pipeline-go: wrong sum\n")
		os.Exit(1)
	}
	fmt.Printf("%.1f\n", float64(took.Microseconds())/1000)
}
