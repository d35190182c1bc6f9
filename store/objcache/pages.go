package objcache

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/model"
)

// # Pages
//
// A page of an object's list (a board's pins, a user's followers, newest
// or oldest first, of a given length, from the list's start or after a
// cursor's position) is cached in the same hash as the object's edges
// (edges.go), in the field "p<mapping>:<rows>:<a|d>", followed for a
// page after a cursor by ":<sequence>:<id>" of the cursor's position, as
// the rows the page read: 'P', the list's length when its owner does
// not carry it among its counts (8 bytes), then each entry's id and
// sequence, 16 bytes.
// It is exact for the same reason the edges are: every statement that
// adds, removes or reorders a row of an object's list records the object
// as changed in the same transaction (package shardsql), and the object's
// invalidation deletes the hash. Fills take the hash's generation as
// edges do, before the page is read from MySQL (a master), and are refused
// if an invalidation has deleted the hash since.

// PageField is the field of a page of rows rows of m, in descending
// (newest first) or ascending order: the list's first rows when afterTo
// is 0, else the rows after the position (afterSeq, afterTo), a cursor's.
func PageField(m model.Mapping, rows int, desc bool, afterSeq int64, afterTo uint64) string {
	b := make([]byte, 0, 64)
	b = append(b, 'p')
	b = strconv.AppendUint(b, uint64(m), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(rows), 10)
	if desc {
		b = append(b, ":d"...)
	} else {
		b = append(b, ":a"...)
	}
	if afterTo != 0 {
		b = append(b, ':')
		b = strconv.AppendInt(b, afterSeq, 10)
		b = append(b, ':')
		b = strconv.AppendUint(b, afterTo, 10)
	}
	return string(b)
}

// ReadPage reads, in one round trip shared with concurrent callers' edge
// and page reads, the entry of object from and its cached page field
// (EdgeRead.Page, nil when not cached), taking the hash's generation
// (making one when the hash has none and the page missed). On a Redis
// failure it returns the error (counted): the caller reads MySQL and does
// not fill.
func (c *Cache) ReadPage(ctx context.Context, from uint64, field string) (EdgeRead, error) {
	r, err := c.readHash(ctx, &edgeReq{from: from, page: field})
	if err != nil {
		return r, err
	}
	if r.ObjectHit {
		c.hits.Inc()
		c.stats.Hits.Add(1)
	}
	if r.Page != nil {
		c.pages.hits.Inc()
		c.pages.stats.Hits.Add(1)
		return r, nil
	}
	c.pages.misses.Inc()
	c.pages.stats.Misses.Add(1)
	if r.Gen == "" {
		if r.Gen, err = c.newGen(ctx, from); err != nil {
			c.errs.Inc()
			r.Gen = ""
		}
	}
	return r, nil
}

// FillPage caches page, the value of field of from's hash as read from
// MySQL after ReadPage, under the generation gen ReadPage returned; an
// invalidation since refuses it (counted), and it is left out (counted)
// when it would take the hash past its limit (fillHash): half of
// Options.HashSize for a page after a cursor, a quarter past it for a
// first page.
// Failures only cost later misses.
func (c *Cache) FillPage(ctx context.Context, from uint64, gen Lease, field string, page []byte) {
	if gen == "" {
		return
	}
	limit := c.hashSize / 2
	if firstPage(field) {
		limit = c.hashSize + c.hashSize/4
	}
	c.fillHash(ctx, from, []any{string(gen), limit, field, page}, c.pages.refused, &c.pages.stats)
}

// firstPage reports whether field (PageField) is a list's first page,
// which no cursor positions.
func firstPage(field string) bool { return strings.Count(field, ":") == 2 }

// pageCounters are the page cache's counters.
type pageCounters struct {
	hits, misses, refused prometheus.Counter
	stats                 Stats
}

// PageStats returns the page cache's counters: Hits and Misses count
// pages read, Refused counts fills.
func (c *Cache) PageStats() *Stats { return &c.pages.stats }

// EncodePage is the cached form of a page's rows, and of the list's
// length when its owner does not carry it (else -1).
func EncodePage(count int64, entries []model.Entry) []byte {
	b := make([]byte, 9, 9+16*len(entries))
	b[0] = 'P'
	binary.BigEndian.PutUint64(b[1:], uint64(count))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint64(b, e.To)
		b = binary.BigEndian.AppendUint64(b, uint64(e.Sequence))
	}
	return b
}

// DecodePage reads what EncodePage wrote.
func DecodePage(b []byte) (count int64, entries []model.Entry, err error) {
	if len(b) < 9 || b[0] != 'P' || (len(b)-9)%16 != 0 {
		return 0, nil, errors.New("objcache: a cached page that EncodePage did not write")
	}
	count, b = int64(binary.BigEndian.Uint64(b[1:])), b[9:]
	entries = make([]model.Entry, len(b)/16)
	for i := range entries {
		entries[i] = model.Entry{To: binary.BigEndian.Uint64(b[16*i:]), Sequence: int64(binary.BigEndian.Uint64(b[16*i+8:]))}
	}
	return count, entries, nil
}
