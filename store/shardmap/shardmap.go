// Package shardmap is the shard map: which physical MySQL host holds which
// range of logical shards. It is pure: the file format, its validation,
// the version hash that names a map, shard → range look-ups, database
// names, and the rewrite a move applies to a range. It opens no
// connection and reads nothing but the map file.
//
// Invariants of a valid Map:
//   - Shards is 1 … 65536 and shard N is the database Prefix + N as %05d.
//   - Ranges are inclusive at both ends, sorted, and cover 0 … Shards-1
//     exactly once; each names a host of Hosts; at least one is open for
//     new users.
//   - A MariaDB server has one role: a replica or a fenced former master
//     of one host, or a master.
//   - A host's DSNs parse and name no database (statements name their
//     shard's database).
package shardmap

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
	"go.yaml.in/yaml/v3"
)

// Defaults of the production layout: 4096 shards named db00000 … db04095.
const (
	DefaultShards   = 4096
	DefaultDBPrefix = "db"
	DefaultDSN      = "root@tcp(127.0.0.1:3306)/"
)

// Map says which physical host holds which range of logical shards.
//
// The file form (YAML, or JSON, which YAML reads too):
//
//	shards: 4096          # logical shard count; default 4096
//	db_prefix: db         # shard N is database <prefix><N as %05d>
//	hosts:
//	  mysql-a:
//	    master: "user:pass@tcp(10.0.0.1:3306)/"
//	    replicas: ["user:pass@tcp(10.0.0.2:3306)/", "user:pass@tcp(10.0.0.4:3306)/"]
//	    replica_reads: true
//	  mysql-b: {master: "user:pass@tcp(10.0.0.3:3306)/"}
//	ranges:
//	  - {shards: "0-2047", host: mysql-a}
//	  - {shards: "2048-4095", host: mysql-b, open: false}
//
// Ranges are inclusive at both ends ("0-2047" is 2048 shards), must not
// overlap, and together must cover 0 … shards-1 with no gap. A range is open
// for new users unless open: false. read_only: true refuses writes to the
// range with EMoving (used while a range is being moved).
//
// A host has one master and zero or more replicas, MariaDB servers
// replicating from it (GTIDs; semi-synchronous in the recommended set-up,
// docs/operations/replicas-and-failover.md). The older form of one
// replica, replica: DSN, is still read, as a list of one. replica_reads: true lets its replicas serve
// reads (package replicas decides which); fenced lists former masters
// that must not take writes until they are re-attached as replicas.
type Map struct {
	Shards   int                 `yaml:"shards" json:"shards"`
	DBPrefix string              `yaml:"db_prefix" json:"db_prefix"`
	Hosts    map[string]HostSpec `yaml:"hosts" json:"hosts"`
	Ranges   []Range             `yaml:"ranges" json:"ranges"`
}

// HostSpec is a physical MySQL host: a master and its replicas. DSNs
// never leave the process (json:"-").
type HostSpec struct {
	Master string `yaml:"master" json:"-"`
	// Replica is the form of one replica from before Replicas; a map keeps
	// the form it was written in, so its version does not change.
	Replica      string   `yaml:"replica,omitempty" json:"-"`
	Replicas     []string `yaml:"replicas,omitempty" json:"-"`
	ReplicaReads bool     `yaml:"replica_reads,omitempty" json:"-"`
	Fenced       []string `yaml:"fenced,omitempty" json:"-"`
}

// ReplicaDSNs lists the host's replicas, in map order, whichever form the
// map gives them in.
func (h HostSpec) ReplicaDSNs() []string {
	if h.Replica != "" {
		return append([]string{h.Replica}, h.Replicas...)
	}
	return h.Replicas
}

// WithReplicas is h with its replicas set to dsns, in the list form.
func (h HostSpec) WithReplicas(dsns []string) HostSpec {
	h.Replica = ""
	h.Replicas = append([]string(nil), dsns...)
	if len(h.Replicas) == 0 {
		h.Replicas = nil
	}
	return h
}

// Range is an inclusive range of shards on one host.
type Range struct {
	Shards   string `yaml:"shards" json:"shards"` // "first-last" or "n"
	Host     string `yaml:"host" json:"host"`
	Open     *bool  `yaml:"open,omitempty" json:"open,omitempty"`
	ReadOnly bool   `yaml:"read_only,omitempty" json:"read_only,omitempty"`

	First int `yaml:"-" json:"first"`
	Last  int `yaml:"-" json:"last"`
}

// IsOpen reports whether new users may be placed in the range.
func (r Range) IsOpen() bool { return r.Open == nil || *r.Open }

var prefixRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,15}$`)
var hostNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// Parse parses and validates a shard map file's contents. Missing shards
// and db_prefix take the given defaults.
func Parse(data []byte, defShards int, defPrefix string) (*Map, error) {
	var m Map
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("shard map: %w", err)
	}
	if m.Shards == 0 {
		m.Shards = defShards
	}
	if m.DBPrefix == "" {
		m.DBPrefix = defPrefix
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Load reads and validates the shard map file at path.
func Load(path string, defShards int, defPrefix string) (*Map, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("shard map: %w", err)
	}
	m, err := Parse(data, defShards, defPrefix)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// SingleHost is the map used when there is no file: every shard on one
// MySQL at dsn, all open.
func SingleHost(dsn string, shards int, prefix string) (*Map, error) {
	m := &Map{
		Shards:   shards,
		DBPrefix: prefix,
		Hosts:    map[string]HostSpec{"default": {Master: dsn}},
		Ranges:   []Range{{Shards: "0-" + strconv.Itoa(shards-1), Host: "default"}},
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// Validate checks the map and fills each range's First and Last. The error
// names the problem: a bad prefix or count, an unknown host, an unparsable
// DSN, a range outside 0 … shards-1, an overlap or a gap.
func (m *Map) Validate() error {
	if m.Shards < 1 || m.Shards > 1<<16 {
		return fmt.Errorf("shard map: shards must be 1 … 65536, got %d", m.Shards)
	}
	if !prefixRE.MatchString(m.DBPrefix) {
		return fmt.Errorf("shard map: db_prefix %q must match %s", m.DBPrefix, prefixRE)
	}
	if len(m.Hosts) == 0 {
		return fmt.Errorf("shard map: no hosts")
	}
	for name, h := range m.Hosts {
		if !hostNameRE.MatchString(name) {
			return fmt.Errorf("shard map: host name %q must match %s", name, hostNameRE)
		}
		if h.Master == "" {
			return fmt.Errorf("shard map: host %q has no master DSN", name)
		}
		if err := checkDSN(name, "master", h.Master); err != nil {
			return err
		}
		for i, dsn := range h.ReplicaDSNs() {
			if err := checkDSN(name, fmt.Sprintf("replica %d", i+1), dsn); err != nil {
				return err
			}
		}
		for i, dsn := range h.Fenced {
			if err := checkDSN(name, fmt.Sprintf("fenced %d", i+1), dsn); err != nil {
				return err
			}
		}
		if h.ReplicaReads && len(h.ReplicaDSNs()) == 0 {
			return fmt.Errorf("shard map: host %q has replica_reads but no replicas", name)
		}
	}
	if err := m.checkServers(); err != nil {
		return err
	}
	if len(m.Ranges) == 0 {
		return fmt.Errorf("shard map: no ranges")
	}
	for i := range m.Ranges {
		r := &m.Ranges[i]
		first, last, err := ParseRange(r.Shards)
		if err != nil {
			return fmt.Errorf("shard map: range %d: %w", i, err)
		}
		if last >= m.Shards {
			return fmt.Errorf("shard map: range %q reaches shard %d, outside 0-%d", r.Shards, last, m.Shards-1)
		}
		if _, ok := m.Hosts[r.Host]; !ok {
			return fmt.Errorf("shard map: range %q names unknown host %q", r.Shards, r.Host)
		}
		r.First, r.Last = first, last
	}
	sort.SliceStable(m.Ranges, func(i, j int) bool { return m.Ranges[i].First < m.Ranges[j].First })
	next, open := 0, false
	for _, r := range m.Ranges {
		switch {
		case r.First < next:
			return fmt.Errorf("shard map: range %q overlaps the range before it (shard %d claimed twice)", r.Shards, r.First)
		case r.First > next:
			return fmt.Errorf("shard map: gap: shards %d-%d are in no range", next, r.First-1)
		}
		next = r.Last + 1
		open = open || r.IsOpen()
	}
	if next != m.Shards {
		return fmt.Errorf("shard map: gap: shards %d-%d are in no range", next, m.Shards-1)
	}
	if !open {
		return fmt.Errorf("shard map: no range is open for new users")
	}
	return nil
}

// CheckWritable returns an error when every range open for new users is
// read-only. Such a map is valid (a failover of the only host holds its
// writes so, and new users' creates then wait for the next map like any
// write to a read-only range), but a shard move refuses to make one.
func (m *Map) CheckWritable() error {
	for _, r := range m.Ranges {
		if r.IsOpen() && !r.ReadOnly {
			return nil
		}
	}
	return fmt.Errorf("shard map: no writable range open for new users (every open range is read_only)")
}

// checkDSN checks one DSN of host name: it parses and names no database.
func checkDSN(name, role, dsn string) error {
	if dsn == "" {
		return fmt.Errorf("shard map: host %q has an empty %s DSN", name, role)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("shard map: host %q %s DSN does not parse: %s", name, role, redactDSNError(err))
	}
	if cfg.DBName != "" {
		return fmt.Errorf("shard map: host %q %s DSN names database %q; give none (statements name their shard)", name, role, cfg.DBName)
	}
	return nil
}

// checkServers checks that a MariaDB server has one role in the map: a
// replica (or a fenced former master) is nobody's master and belongs to
// one host only, and a master is not its own replica. Two hosts may share
// a master (two names for one server), as before replicas.
func (m *Map) checkServers() error {
	masters := map[string]string{} // address → host
	for name, h := range m.Hosts {
		masters[HostAddr(h.Master)] = name
	}
	seen := map[string]string{} // address → "host role"
	names := make([]string, 0, len(m.Hosts))
	for name := range m.Hosts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		h := m.Hosts[name]
		for _, set := range []struct {
			role string
			dsns []string
		}{{"replica", h.ReplicaDSNs()}, {"fenced master", h.Fenced}} {
			for _, dsn := range set.dsns {
				addr := HostAddr(dsn)
				if owner, ok := masters[addr]; ok {
					return fmt.Errorf("shard map: host %q names %s as a %s, but it is the master of host %q", name, addr, set.role, owner)
				}
				if other, ok := seen[addr]; ok {
					return fmt.Errorf("shard map: host %q names %s as a %s, but it is already %s", name, addr, set.role, other)
				}
				seen[addr] = fmt.Sprintf("a %s of host %q", set.role, name)
			}
		}
	}
	return nil
}

// ParseRange reads "A-B" (inclusive) or "N".
func ParseRange(s string) (first, last int, err error) {
	a, b, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found {
		b = a
	}
	first, err1 := strconv.Atoi(strings.TrimSpace(a))
	last, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || first < 0 || last < first {
		return 0, 0, fmt.Errorf("bad shard range %q: want FIRST-LAST with 0 <= FIRST <= LAST", s)
	}
	return first, last, nil
}

// RangeOf returns the range holding shard.
func (m *Map) RangeOf(shard int) (Range, bool) {
	i := sort.Search(len(m.Ranges), func(i int) bool { return m.Ranges[i].Last >= shard })
	if i < len(m.Ranges) && m.Ranges[i].First <= shard {
		return m.Ranges[i], true
	}
	return Range{}, false
}

// DBName is the database of a shard: prefix + %05d.
func (m *Map) DBName(shard int) string { return fmt.Sprintf("%s%05d", m.DBPrefix, shard) }

// Marshal writes the map in its file form.
func (m *Map) Marshal() ([]byte, error) {
	out := *m
	out.Ranges = make([]Range, len(m.Ranges))
	for i, r := range m.Ranges {
		r.Shards = fmt.Sprintf("%d-%d", r.First, r.Last)
		out.Ranges[i] = r
	}
	return yaml.Marshal(&out)
}

// HostAddr is a host's master address with no credentials, safe to show.
func HostAddr(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "?"
	}
	return cfg.Net + "(" + cfg.Addr + ")"
}

// redactDSNError keeps a DSN parse error from echoing a password.
func redactDSNError(err error) string {
	s := err.Error()
	if i := strings.Index(s, "@"); i >= 0 {
		return "malformed DSN"
	}
	return s
}
