package replicas

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// GTID is one MariaDB global transaction id, domain-server-sequence. In
// one replication domain the sequence numbers only grow, whichever server
// wrote them (gtid_strict_mode): a promoted replica goes on from its old
// master's last number.
type GTID struct {
	Domain uint32
	Server uint32
	Seq    uint64
}

func (g GTID) String() string { return fmt.Sprintf("%d-%d-%d", g.Domain, g.Server, g.Seq) }

// Pos is a GTID position: at most one GTID per domain (the last applied
// or written), sorted by domain, as @@gtid_slave_pos, @@gtid_binlog_pos
// and MASTER_GTID_WAIT write it: "0-1-100,1-2-7". The empty position is
// nothing at all.
type Pos []GTID

// ParsePos reads a position as MariaDB writes it. Spaces and newlines
// around the commas are allowed (SHOW SLAVE STATUS wraps long ones). A
// domain given twice keeps the higher sequence number.
func ParsePos(s string) (Pos, error) {
	var p Pos
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f := strings.Split(part, "-")
		if len(f) != 3 {
			return nil, fmt.Errorf("GTID %q is not domain-server-sequence", part)
		}
		d, err1 := strconv.ParseUint(f[0], 10, 32)
		sv, err2 := strconv.ParseUint(f[1], 10, 32)
		seq, err3 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("GTID %q is not three unsigned numbers", part)
		}
		p = p.add(GTID{Domain: uint32(d), Server: uint32(sv), Seq: seq})
	}
	return p, nil
}

// add returns p with g in its domain's place, unless p is ahead there.
func (p Pos) add(g GTID) Pos {
	i, found := slices.BinarySearchFunc(p, g.Domain, func(x GTID, d uint32) int { return cmpU32(x.Domain, d) })
	if found {
		if g.Seq > p[i].Seq {
			p[i] = g
		}
		return p
	}
	return slices.Insert(p, i, g)
}

func cmpU32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// String writes p as MariaDB does ("" when empty).
func (p Pos) String() string {
	parts := make([]string, len(p))
	for i, g := range p {
		parts[i] = g.String()
	}
	return strings.Join(parts, ",")
}

// Domain returns p's GTID in domain d.
func (p Pos) Domain(d uint32) (GTID, bool) {
	i, found := slices.BinarySearchFunc(p, d, func(x GTID, d uint32) int { return cmpU32(x.Domain, d) })
	if !found {
		return GTID{}, false
	}
	return p[i], true
}

// Covers reports whether a server at p has every transaction of q: in
// each of q's domains, p is at the same sequence number or beyond.
func (p Pos) Covers(q Pos) bool {
	for _, g := range q {
		h, ok := p.Domain(g.Domain)
		if !ok || h.Seq < g.Seq {
			return false
		}
	}
	return true
}

// Behind is how many transactions a server at p lacks of q: the sum over
// q's domains of the sequence numbers p is short by (exact under
// gtid_strict_mode, where a domain's numbers have no gaps).
func (p Pos) Behind(q Pos) uint64 {
	var n uint64
	for _, g := range q {
		h, _ := p.Domain(g.Domain)
		if h.Seq < g.Seq {
			n += g.Seq - h.Seq
		}
	}
	return n
}

// Merge is the position covering both p and q: each domain at the higher
// sequence number of the two.
func (p Pos) Merge(q Pos) Pos {
	out := slices.Clone(p)
	for _, g := range q {
		out = out.add(g)
	}
	return out
}
