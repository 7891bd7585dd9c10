// count.go - the Go peer for `schedbench count`: one producer sends
// 0..MSGS-1 to one counter goroutine (a buffered channel of 1024 as its
// mailbox), closes it, and gets the count and the sum back. Args: MSGS 1.
// Prints ms.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	msgs, _ := strconv.ParseUint(os.Args[1], 10, 64)
	start := time.Now()
	box := make(chan uint64, 1024)
	result := make(chan [2]uint64)
	go func() {
		count, sum := uint64(0), uint64(0)
		for v := range box {
			count++
			sum += v
		}
		result <- [2]uint64{count, sum}
	}()
	for i := uint64(0); i < msgs; i++ {
		box <- i
	}
	close(box)
	res := <-result
	took := time.Since(start)
	if res[0] != msgs || res[1] != msgs*(msgs-1)/2 {
		fmt.Fprintf(os.Stderr, "count-go: counted %d, sum %d\n", res[0], res[1])
		os.Exit(1)
	}
	fmt.Printf("%.1f\n", float64(took.Microseconds())/1000)
}
