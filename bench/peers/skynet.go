// skynet.go - the Go peer for `schedbench skynet`: the same 10-ary tree
// of 1,111,111 goroutines with 1,000,000 leaves, results sent up over
// channels. Prints the best of 5 runs in ms.
package main

import (
	"fmt"
	"os"
	"time"
)

func skynet(c chan<- int64, num, size int64) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int64)
	child := size / 10
	for i := int64(0); i < 10; i++ {
		go skynet(rc, num+i*child, child)
	}
	var sum int64
	for i := 0; i < 10; i++ {
		sum += <-rc
	}
	c <- sum
}

func main() {
	best := time.Duration(1 << 62)
	for run := 0; run < 5; run++ {
		c := make(chan int64)
		start := time.Now()
		go skynet(c, 0, 1000000)
		result := <-c
		took := time.Since(start)
		if result != 499999500000 {
			fmt.Fprintf(os.Stderr, "skynet-go: wrong result %d\n", result)
			os.Exit(1)
		}
		if took < best {
			best = took
		}
	}
	fmt.Printf("%.1f\n", float64(best.Microseconds())/1000)
}
