// Command s3bench drives an S3 endpoint the same way for every system it
// measures (Loligo's gateway, Ceph's RGW): PUT or GET throughput of one
// object size with N concurrent clients for a fixed time, or the time to
// list a bucket of many keys. It prints one JSON object per run.
//
//	s3bench -endpoint http://127.0.0.1:7480 -access K -secret S -bucket b \
//	        -op put|get|list -size 4096 -clients 16 -secs 20 [-keys 10000]
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/signer"
)

type result struct {
	Op        string  `json:"op"`
	Size      int64   `json:"size"`
	Clients   int     `json:"clients"`
	Seconds   float64 `json:"seconds"`
	Ops       int64   `json:"ops"`
	Errors    int64   `json:"errors"`
	OpsPerSec float64 `json:"ops_per_s"`
	MiBPerSec float64 `json:"mib_per_s"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	Keys      int     `json:"keys,omitempty"`
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "s3bench: "+format+"\n", a...)
	os.Exit(1)
}

func percentile(ms []float64, p float64) float64 {
	if len(ms) == 0 {
		return 0
	}
	sort.Float64s(ms)
	return ms[int(p*float64(len(ms)-1))]
}

// timed runs op from `clients` goroutines for `secs` seconds; op gets the
// client number and its op count and returns the bytes it moved.
func timed(clients int, secs float64, op func(c int, i int64) (int64, error)) (int64, int64, int64, []float64, float64) {
	var ops, errs, moved int64
	var mu sync.Mutex
	var lat []float64
	deadline := time.Now().Add(time.Duration(secs * float64(time.Second)))
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			var mine []float64
			for i := int64(0); time.Now().Before(deadline); i++ {
				t := time.Now()
				n, err := op(c, i)
				if err != nil {
					if atomic.AddInt64(&errs, 1) <= 3 {
						fmt.Fprintln(os.Stderr, "s3bench:", err)
					}
					continue
				}
				mine = append(mine, float64(time.Since(t).Microseconds())/1000)
				atomic.AddInt64(&ops, 1)
				atomic.AddInt64(&moved, n)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	return ops, errs, moved, lat, time.Since(start).Seconds()
}

// listAll pages through ListObjectsV2 (1,000 keys a page) with signed
// requests and counts the keys without decoding the XML into objects:
// minio-go's decoder takes about as long per page as a server answers
// one, which would hide the servers' difference behind the client's.
func listAll(tr http.RoundTripper, u *url.URL, bucket, access, secret string) (int, error) {
	hc := &http.Client{Transport: tr}
	n, token := 0, ""
	for {
		q := url.Values{"list-type": {"2"}, "max-keys": {"1000"}}
		if token != "" {
			q.Set("continuation-token", token)
		}
		req, err := http.NewRequest("GET", u.Scheme+"://"+u.Host+"/"+bucket+"?"+q.Encode(), nil)
		if err != nil {
			return n, err
		}
		req.Header.Set("X-Amz-Content-Sha256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
		req = signer.SignV4(*req, access, secret, "", "default")
		resp, err := hc.Do(req)
		if err != nil {
			return n, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return n, err
		}
		if resp.StatusCode != 200 {
			return n, fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
		}
		n += bytes.Count(body, []byte("<Key>"))
		token = between(body, "<NextContinuationToken>", "</NextContinuationToken>")
		if !bytes.Contains(body, []byte("<IsTruncated>true</IsTruncated>")) || token == "" {
			return n, nil
		}
	}
}

// between is the text of `body` between the first `open` and the next
// `close` (XML-unescaped for the few entities a token may hold).
func between(body []byte, open, close string) string {
	i := bytes.Index(body, []byte(open))
	if i < 0 {
		return ""
	}
	rest := body[i+len(open):]
	j := bytes.Index(rest, []byte(close))
	if j < 0 {
		return ""
	}
	r := strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&quot;", `"`, "&#39;", "'")
	return r.Replace(string(rest[:j]))
}

func main() {
	endpoint := flag.String("endpoint", "http://127.0.0.1:7480", "S3 endpoint URL")
	access := flag.String("access", "", "access key")
	secret := flag.String("secret", "", "secret key")
	bucket := flag.String("bucket", "bench", "bucket (made if missing)")
	op := flag.String("op", "put", "put, get or list")
	size := flag.Int64("size", 4096, "object size in bytes (put)")
	clients := flag.Int("clients", 16, "concurrent clients")
	secs := flag.Float64("secs", 20, "seconds to run (put, get)")
	keys := flag.Int("keys", 10000, "keys in the bucket (list)")
	rounds := flag.Int("rounds", 5, "full listings to time (list)")
	flag.Parse()

	u, err := url.Parse(*endpoint)
	if err != nil {
		fail("endpoint: %v", err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256, DisableCompression: true}
	cl, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(*access, *secret, ""),
		Secure:       u.Scheme == "https",
		Region:       "default",
		BucketLookup: minio.BucketLookupPath,
		Transport:    tr,
	})
	if err != nil {
		fail("client: %v", err)
	}
	ctx := context.Background()
	if ok, err := cl.BucketExists(ctx, *bucket); err != nil {
		fail("bucket: %v", err)
	} else if !ok {
		if err := cl.MakeBucket(ctx, *bucket, minio.MakeBucketOptions{Region: "default"}); err != nil {
			fail("make bucket: %v", err)
		}
	}
	r := result{Op: *op, Size: *size, Clients: *clients}
	switch *op {
	case "put":
		data := make([]byte, *size)
		if _, err := rand.Read(data); err != nil {
			fail("random: %v", err)
		}
		opts := minio.PutObjectOptions{DisableMultipart: true, DisableContentSha256: true,
			SendContentMd5: false, PartSize: 0}
		ops, errs, moved, lat, took := timed(*clients, *secs, func(c int, i int64) (int64, error) {
			key := fmt.Sprintf("obj-%d-%d", c, i)
			_, err := cl.PutObject(ctx, *bucket, key, bytes.NewReader(data), *size, opts)
			return *size, err
		})
		r.Ops, r.Errors, r.Seconds = ops, errs, took
		r.OpsPerSec, r.MiBPerSec = float64(ops)/took, float64(moved)/took/(1<<20)
		r.P50Ms, r.P99Ms = percentile(lat, 0.5), percentile(lat, 0.99)
	case "get":
		// Read back what a put run left, each client over its own keys.
		var names []string
		for o := range cl.ListObjects(ctx, *bucket, minio.ListObjectsOptions{Recursive: true}) {
			if o.Err != nil {
				fail("list: %v", o.Err)
			}
			if o.Size == *size && strings.HasPrefix(o.Key, "obj-") {
				names = append(names, o.Key)
			}
		}
		if len(names) == 0 {
			fail("no %d-byte objects to read: run -op put first", *size)
		}
		buf := make([]byte, 1<<20)
		var bufs sync.Map
		ops, errs, moved, lat, took := timed(*clients, *secs, func(c int, i int64) (int64, error) {
			b, _ := bufs.LoadOrStore(c, make([]byte, len(buf)))
			key := names[(int64(c)*7919+i*104729)%int64(len(names))]
			obj, err := cl.GetObject(ctx, *bucket, key, minio.GetObjectOptions{})
			if err != nil {
				return 0, err
			}
			defer obj.Close()
			n, err := io.CopyBuffer(io.Discard, obj, b.([]byte))
			if err == nil && n != *size {
				err = fmt.Errorf("%s: read %d of %d bytes", key, n, *size)
			}
			return n, err
		})
		r.Ops, r.Errors, r.Seconds = ops, errs, took
		r.OpsPerSec, r.MiBPerSec = float64(ops)/took, float64(moved)/took/(1<<20)
		r.P50Ms, r.P99Ms = percentile(lat, 0.5), percentile(lat, 0.99)
	case "list":
		// Fill to `keys` empty objects, then time full listings.
		have := 0
		for o := range cl.ListObjects(ctx, *bucket, minio.ListObjectsOptions{Recursive: true}) {
			if o.Err != nil {
				fail("list: %v", o.Err)
			}
			have++
		}
		var next int64 = int64(have)
		var wg sync.WaitGroup
		for c := 0; c < *clients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := atomic.AddInt64(&next, 1) - 1
					if i >= int64(*keys) {
						return
					}
					key := fmt.Sprintf("key-%06d", i)
					if _, err := cl.PutObject(ctx, *bucket, key, bytes.NewReader(nil), 0,
						minio.PutObjectOptions{DisableContentSha256: true}); err != nil {
						fail("fill: %v", err)
					}
				}
			}()
		}
		wg.Wait()
		var lat []float64
		start := time.Now()
		for round := 0; round < *rounds; round++ {
			t := time.Now()
			n, err := listAll(tr, u, *bucket, *access, *secret)
			if err != nil {
				fail("list: %v", err)
			}
			if n < *keys {
				fail("listed %d keys of %d", n, *keys)
			}
			r.Keys = n
			lat = append(lat, float64(time.Since(t).Microseconds())/1000)
		}
		r.Seconds = time.Since(start).Seconds()
		r.Ops = int64(*rounds)
		r.OpsPerSec = float64(*rounds) / r.Seconds
		r.P50Ms, r.P99Ms = percentile(lat, 0.5), percentile(lat, 0.99)
	default:
		fail("unknown -op %q", *op)
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	if r.Errors > 0 && r.Errors*10 > r.Ops {
		os.Exit(2)
	}
}
