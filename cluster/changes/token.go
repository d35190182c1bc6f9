package changes

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/pinstore/pinstore/model"
)

// Token is where a stream resumes: per host of the map, the GTID position
// (one GTID per domain, MariaDB's gtid_binlog_pos form) after the last
// transaction whose events were all told, and, when the last event told
// was inside a transaction, that transaction's GTID and the event's
// index. Clients hold it as an opaque string (Encode): base64 of JSON.
type Token struct {
	Hosts map[string]HostPos `json:"hosts"`
}

// HostPos is a Token's place in one host's binlog.
type HostPos struct {
	Pos   string `json:"pos"`             // GTIDs of the transactions told, one per domain
	GTID  string `json:"gtid,omitempty"`  // a transaction told in part
	Index int    `json:"index,omitempty"` // its last event told
}

type tokenWire struct {
	V     int                `json:"v"`
	Hosts map[string]HostPos `json:"hosts"`
}

// Encode is the token as clients hold it.
func (t Token) Encode() string {
	b, _ := json.Marshal(tokenWire{V: 1, Hosts: t.Hosts}) // strings and ints: never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParseToken reads a token a client sent back; "" is no token (the
// stream starts at the hosts' current positions). A token that is not
// one is model.EInvalid.
func ParseToken(s string) (Token, error) {
	if s == "" {
		return Token{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var w tokenWire
	if err == nil {
		err = json.Unmarshal(b, &w)
	}
	if err != nil || w.V != 1 || len(w.Hosts) == 0 {
		return Token{}, model.Errorf(model.EInvalid, "not a change stream token")
	}
	for host, p := range w.Hosts {
		if _, err := parsePos(p.Pos); err != nil {
			return Token{}, model.Errorf(model.EInvalid, "not a change stream token: host %s: %v", host, err)
		}
		if p.GTID != "" {
			if _, err := mysql.ParseMariadbGTID(p.GTID); err != nil || p.Index < 0 {
				return Token{}, model.Errorf(model.EInvalid, "not a change stream token: host %s: bad transaction %q", host, p.GTID)
			}
		}
	}
	return Token{Hosts: w.Hosts}, nil
}

// pos is a GTID position: per domain, the last GTID.
type pos map[uint32]mysql.MariadbGTID

// parsePos reads "0-1-57,1-2-9"; a domain named twice is an error, as it
// is to MariaDB.
func parsePos(s string) (pos, error) {
	p := pos{}
	if strings.TrimSpace(s) == "" {
		return p, nil
	}
	for _, part := range strings.Split(s, ",") {
		g, err := mysql.ParseMariadbGTID(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("bad GTID %q", part)
		}
		if _, dup := p[g.DomainID]; dup {
			return nil, fmt.Errorf("domain %d named twice in %q", g.DomainID, s)
		}
		p[g.DomainID] = *g
	}
	return p, nil
}

// String is MariaDB's form, domains in order.
func (p pos) String() string {
	doms := slices.Sorted(maps.Keys(p))
	parts := make([]string, len(doms))
	for i, d := range doms {
		g := p[d]
		parts[i] = g.String()
	}
	return strings.Join(parts, ",")
}

// with is p after the transaction g: g replaces its domain's GTID.
func (p pos) with(g mysql.MariadbGTID) pos {
	out := maps.Clone(p)
	if out == nil {
		out = pos{}
	}
	out[g.DomainID] = g
	return out
}

// set is p as go-mysql's GTID set for StartSyncGTID. MariadbGTIDSet keeps
// a GTID per domain and server, and would name a domain twice once its
// server changed (after a failover), which MariaDB refuses as a replica's
// position; p keeps one per domain, and so does the set made from it.
func (p pos) set() mysql.GTIDSet {
	s := &mysql.MariadbGTIDSet{Sets: map[uint32]map[uint32]*mysql.MariadbGTID{}}
	for d, g := range p {
		g := g
		s.Sets[d] = map[uint32]*mysql.MariadbGTID{g.ServerID: &g}
	}
	return s
}

// lost lists what a start from p misses when the oldest binlog begins
// after oldest (its Gtid_list: per domain, the last GTID before it):
// for each domain, the sequence numbers purged since p. Empty when
// nothing was lost.
func (p pos) lost(oldest pos) []string {
	var out []string
	for _, d := range slices.Sorted(maps.Keys(oldest)) {
		o := oldest[d]
		have, ok := p[d]
		switch {
		case !ok && o.SequenceNumber > 0:
			out = append(out, fmt.Sprintf("domain %d up to %s", d, o.String()))
		case ok && have.SequenceNumber < o.SequenceNumber:
			out = append(out, fmt.Sprintf("domain %d from sequence %d to %d (after %s, up to %s)", d, have.SequenceNumber+1, o.SequenceNumber, have.String(), o.String()))
		}
	}
	sort.Strings(out)
	return out
}
