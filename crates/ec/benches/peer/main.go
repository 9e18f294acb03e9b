// Peer benchmark for `cargo bench -p loligo-ec`: Reed-Solomon encode with
// github.com/klauspost/reedsolomon on one goroutine, so Loligo's encoder
// is compared with the fastest open implementation in the same run.
//
// Usage: go run . K M SHARD_BYTES SECONDS [ISA]
// ISA picks the instruction sets klauspost may use, to match a Loligo
// backend: gfni (everything the CPU has: AVX-512 and GFNI where present;
// the default), gfni-avx2 (GFNI on AVX registers, no AVX-512), avx512
// (AVX-512 and AVX2, no GFNI), avx2 (AVX2 and SSSE3, no AVX-512, no GFNI),
// scalar (pure Go). Both sides use a Cauchy matrix.
// Prints one JSON object: {"encode_gbps": data bytes encoded per second / 1e9}.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/klauspost/reedsolomon"
)

func main() {
	if len(os.Args) != 5 && len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: peer K M SHARD_BYTES SECONDS [gfni|gfni-avx2|avx512|avx2|scalar]")
		os.Exit(2)
	}
	k, _ := strconv.Atoi(os.Args[1])
	m, _ := strconv.Atoi(os.Args[2])
	shard, _ := strconv.Atoi(os.Args[3])
	secs, _ := strconv.ParseFloat(os.Args[4], 64)
	opts := []reedsolomon.Option{reedsolomon.WithMaxGoroutines(1), reedsolomon.WithCauchyMatrix()}
	isa := "gfni"
	if len(os.Args) == 6 {
		isa = os.Args[5]
	}
	switch isa {
	case "gfni":
	case "gfni-avx2":
		opts = append(opts, reedsolomon.WithAVX512(false), reedsolomon.WithGFNI(false))
	case "avx512":
		opts = append(opts, reedsolomon.WithGFNI(false), reedsolomon.WithAVXGFNI(false))
	case "avx2":
		opts = append(opts, reedsolomon.WithAVX512(false), reedsolomon.WithGFNI(false), reedsolomon.WithAVXGFNI(false))
	case "scalar":
		opts = append(opts, reedsolomon.WithAVX512(false), reedsolomon.WithGFNI(false), reedsolomon.WithAVXGFNI(false),
			reedsolomon.WithAVX2(false), reedsolomon.WithSSSE3(false), reedsolomon.WithSSE2(false))
	default:
		fmt.Fprintln(os.Stderr, "unknown instruction set", isa)
		os.Exit(2)
	}
	enc, err := reedsolomon.New(k, m, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shards := make([][]byte, k+m)
	x := uint64(0x9E3779B97F4A7C15)
	for i := range shards {
		shards[i] = make([]byte, shard)
		if i < k {
			for j := range shards[i] {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				shards[i][j] = byte(x >> 32)
			}
		}
	}
	if err := enc.Encode(shards); err != nil { // warm-up
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	budget := time.Duration(secs * float64(time.Second))
	start := time.Now()
	n := 0
	for n < 2 || time.Since(start) < budget {
		_ = enc.Encode(shards)
		n++
	}
	el := time.Since(start).Seconds()
	fmt.Printf("{\"encode_gbps\": %f}\n", float64(k*shard*n)/el/1e9)
}
