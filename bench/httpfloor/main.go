// Command httpfloor serves the floor under pinstore's reads by id: Go's
// net/http answering every request with a fixed body of a cached pin's
// size and the headers pinstore sends (Content-Type, Date, Etag,
// X-Request-Id), with no routing, authentication, metrics, access log or
// cache read. bench/load's get-pin scenario run against it (-mode api)
// gives the CPU per request that net/http and the kernel alone cost on
// this machine: the bound under pinstore while it served on net/http, and
// the reason it now serves on fasthttp's loop (internal/httpserve).
//
//	go run ./bench/httpfloor -addr 127.0.0.1:18099 &
//	go run ./bench/load -addr 127.0.0.1:18099 -scenarios get-pin -mode api -duration 8s -rounds 1 [seed flags]
//
// With -from, the body and the Content-Type and Etag headers are those of
// one real response, fetched once at start (a pin's URL on a running
// pinstore, with -token its bearer token); run against it in both modes,
// get-pin-bare gives the highest ratio to the raw select that a net/http
// server reaches on the machine.
//
// With -loop httpserve the same handler is served on pinstore's own
// connection loop (internal/httpserve, fasthttp's loop under a net/http
// Handler): the floor under pinstore as it serves now.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/pinstore/pinstore/internal/httpserve"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18099", "listen address")
	size := flag.Int("size", 468, "response body bytes (a seeded pin's document with counts is 468)")
	from := flag.String("from", "", "URL whose response body and Content-Type and Etag headers to serve instead (fetched once at start)")
	token := flag.String("token", "", "bearer token for -from")
	loop := flag.String("loop", "net", "the connection loop: net (net/http's server) or httpserve (pinstore's)")
	flag.Parse()
	body := []byte(`{"id":"1","type":"pin","description":"` + strings.Repeat("x", max(*size-41, 0)) + `"}` + "\n")
	ctype, etag := "application/json", `"1"`
	if *from != "" {
		var err error
		if body, ctype, etag, err = fetch(*from, *token); err != nil {
			log.Fatal(err)
		}
	}
	length := []string{strconv.Itoa(len(body))}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Content-Type"] = []string{ctype}
		h["Etag"] = []string{etag}
		h["X-Request-Id"] = []string{"85357085afc0c8b49dcbb342f276c915"}
		h["Content-Length"] = length
		_, _ = w.Write(body)
	})
	switch *loop {
	case "net":
		log.Fatal(http.ListenAndServe(*addr, handler))
	case "httpserve":
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			log.Fatal(err)
		}
		log.Fatal(httpserve.New(handler, httpserve.Config{}).Serve(ln))
	default:
		log.Fatalf("-loop %q: want net or httpserve", *loop)
	}
}

// fetch GETs url (with token as a bearer token) and returns its body and
// Content-Type and Etag headers; anything but a 200 is an error.
func fetch(url, token string) (body []byte, ctype, etag string, err error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, "", "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, "", "", err
	}
	defer resp.Body.Close()
	if body, err = io.ReadAll(resp.Body); err != nil {
		return nil, "", "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, resp.Header.Get("Content-Type"), resp.Header.Get("Etag"), nil
}
