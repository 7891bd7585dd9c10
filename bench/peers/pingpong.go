// pingpong.go - the Go peer for `schedbench pingpong`: two goroutines
// bouncing a message over unbuffered channels. Prints the best of 3 runs
// in round trips per second.
package main

import (
	"fmt"
	"time"
)

func main() {
	const rounds = 2000000
	best := 0.0
	for run := 0; run < 3; run++ {
		ping, pong := make(chan int64), make(chan int64)
		go func() {
			for v := range ping {
				pong <- v
			}
			close(pong)
		}()
		start := time.Now()
		for i := int64(0); i < rounds; i++ {
			ping <- i
			<-pong
		}
		secs := time.Since(start).Seconds()
		close(ping)
		if r := rounds / secs; r > best {
			best = r
		}
	}
	fmt.Printf("%.0f\n", best)
}
