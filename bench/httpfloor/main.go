// Command httpfloor serves the floor under pinstore's reads by id: Go's
// net/http answering every request with a fixed body of a cached pin's
// size and the headers pinstore sends (Content-Type, Date, Etag,
// X-Request-Id), with no routing, authentication, metrics, access log or
// cache read. bench/load's get-pin scenario run against it (-mode api)
// gives the CPU per request that net/http and the kernel alone cost on
// this machine, the bound below any cut inside pinstore.
//
//	go run ./bench/httpfloor -addr 127.0.0.1:18099 &
//	go run ./bench/load -addr 127.0.0.1:18099 -scenarios get-pin -mode api -duration 8s -rounds 1 [seed flags]
package main

import (
	"flag"
	"log"
	"net/http"
	"strconv"
	"strings"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18099", "listen address")
	size := flag.Int("size", 468, "response body bytes (a seeded pin's document with counts is 468)")
	flag.Parse()
	body := []byte(`{"id":"1","type":"pin","description":"` + strings.Repeat("x", max(*size-41, 0)) + `"}` + "\n")
	length := []string{strconv.Itoa(len(body))}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Etag"] = []string{`"1"`}
		h["X-Request-Id"] = []string{"85357085afc0c8b49dcbb342f276c915"}
		h["Content-Length"] = length
		_, _ = w.Write(body)
	})
	log.Fatal(http.ListenAndServe(*addr, nil))
}
