package backup

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ManifestFile is the manifest's name in a backup directory; DataDir and
// BinlogDir are where mariadb-backup's copy and the tail of the source's
// binary logs are.
const (
	ManifestFile = "manifest.json"
	DataDir      = "data"
	BinlogDir    = "binlog"
	LogFile      = "backup.log"
	formatV1     = 1
)

// Manifest describes one backup of one host.
type Manifest struct {
	Format int `json:"format"`

	// The deployment: a restore into another one is refused.
	Shards   int    `json:"shards"`
	DBPrefix string `json:"db_prefix"`

	Host       string      `json:"host"`        // as the map names it
	Source     string      `json:"source"`      // the server copied, host:port
	SourceRole string      `json:"source_role"` // "replica" or "master"
	Ranges     []ShardSpan `json:"ranges"`      // the host's ranges when the backup was taken
	MapVersion string      `json:"map_version"` // shardmap.Map.Version of that map
	MapRev     string      `json:"map_revision"`

	// GTID is the backup's position: every transaction up to it is in
	// data/, none after (mariadb-backup's binlog info); BinlogFile and
	// BinlogPos are the same point in the source's binary log.
	GTID       string `json:"gtid"`
	BinlogFile string `json:"binlog_file"`
	BinlogPos  int64  `json:"binlog_pos"`

	// Check is every shard table's row count and checksum in one snapshot
	// of the source at Check.GTID (at or after GTID); binlog/ holds the
	// transactions between the two.
	Check Check `json:"check"`

	Server Server `json:"server"`

	DataBytes   int64     `json:"data_bytes"`
	BinlogBytes int64     `json:"binlog_bytes"`
	Started     time.Time `json:"started"`
	Ended       time.Time `json:"ended"`

	PinstoreVersion      string `json:"pinstore_version"`
	MariaDBBackupVersion string `json:"mariadb_backup_version"`

	// Verified is the last verification (Verify); nil: never verified.
	Verified *Verification `json:"verified"`
}

// ShardSpan is an inclusive range of shards.
type ShardSpan struct {
	First int `json:"first"`
	Last  int `json:"last"`
}

func (s ShardSpan) String() string {
	if s.First == s.Last {
		return strconv.Itoa(s.First)
	}
	return fmt.Sprintf("%d-%d", s.First, s.Last)
}

// holds reports whether shard is in one of spans.
func holds(spans []ShardSpan, shard int) bool {
	for _, s := range spans {
		if shard >= s.First && shard <= s.Last {
			return true
		}
	}
	return false
}

// Check is a snapshot's table checksums: database → table → sum.
type Check struct {
	GTID      string                         `json:"gtid"`
	Databases map[string]map[string]TableSum `json:"databases"`
}

// TableSum is a table's row count and the XOR of its rows' CRC32s.
type TableSum struct {
	Rows int64  `json:"rows"`
	Sum  uint32 `json:"crc32_xor"`
}

// Server is what a scratch mariadbd needs to open the copied files: the
// source's version and InnoDB layout.
type Server struct {
	Version          string `json:"version"`
	PageSize         int    `json:"innodb_page_size"`
	DataFilePath     string `json:"innodb_data_file_path"`
	UndoTablespaces  int    `json:"innodb_undo_tablespaces"`
	CharacterSet     string `json:"character_set_server"`
	Collation        string `json:"collation_server"`
	LowerCaseTableNm int    `json:"lower_case_table_names"`
}

// Verification is the result of one Verify.
type Verification struct {
	OK      bool      `json:"ok"`
	At      time.Time `json:"at"`
	Took    string    `json:"took"`
	Tables  int       `json:"tables"`
	Rows    int64     `json:"rows"`
	Problem string    `json:"problem,omitempty"`
}

// ReadManifest reads and checks DIR/manifest.json.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest %s does not parse: %w", filepath.Join(dir, ManifestFile), err)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", filepath.Join(dir, ManifestFile), err)
	}
	return &m, nil
}

func (m *Manifest) validate() error {
	switch {
	case m.Format != formatV1:
		return fmt.Errorf("format %d: this pinstore reads format %d", m.Format, formatV1)
	case m.Shards < 1 || m.DBPrefix == "":
		return errors.New("no shard count or database prefix")
	case m.Host == "" || len(m.Ranges) == 0:
		return errors.New("no host or ranges")
	case m.Server.PageSize == 0:
		return errors.New("no InnoDB page size")
	}
	if _, err := ParseGTID(m.GTID); err != nil {
		return fmt.Errorf("gtid: %w", err)
	}
	if _, err := ParseGTID(m.Check.GTID); err != nil {
		return fmt.Errorf("check gtid: %w", err)
	}
	for _, r := range m.Ranges {
		if r.First < 0 || r.Last < r.First || r.Last >= m.Shards {
			return fmt.Errorf("range %s outside 0-%d", r, m.Shards-1)
		}
	}
	return nil
}

// write replaces DIR/manifest.json atomically.
func (m *Manifest) write(dir string) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ManifestFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, ManifestFile)); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

// Databases lists the shard databases of the manifest's ranges.
func (m *Manifest) Databases() []string {
	var dbs []string
	for _, r := range m.Ranges {
		for s := r.First; s <= r.Last; s++ {
			dbs = append(dbs, dbName(m.DBPrefix, s))
		}
	}
	return dbs
}

func dbName(prefix string, shard int) string { return fmt.Sprintf("%s%05d", prefix, shard) }

// GTIDPos is a MariaDB GTID position: per replication domain, the last
// transaction's server id and sequence number.
type GTIDPos map[uint32]GTID

// GTID is one transaction's id in a domain.
type GTID struct {
	Server uint32
	Seq    uint64
}

// ParseGTID reads "0-1-42,1-2-7" (empty: no transaction).
func ParseGTID(s string) (GTIDPos, error) {
	p := GTIDPos{}
	s = strings.TrimSpace(s)
	if s == "" {
		return p, nil
	}
	for _, part := range strings.Split(s, ",") {
		f := strings.Split(strings.TrimSpace(part), "-")
		if len(f) != 3 {
			return nil, fmt.Errorf("%q is not a GTID (domain-server-sequence)", part)
		}
		d, err1 := strconv.ParseUint(f[0], 10, 32)
		sv, err2 := strconv.ParseUint(f[1], 10, 32)
		seq, err3 := strconv.ParseUint(f[2], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("%q is not a GTID (domain-server-sequence)", part)
		}
		if _, dup := p[uint32(d)]; dup {
			return nil, fmt.Errorf("%q names domain %d twice", s, d)
		}
		p[uint32(d)] = GTID{Server: uint32(sv), Seq: seq}
	}
	return p, nil
}

func (p GTIDPos) String() string {
	ds := make([]uint32, 0, len(p))
	for d := range p {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%d-%d-%d", d, p[d].Server, p[d].Seq)
	}
	return strings.Join(parts, ",")
}

// Covers reports whether p has reached q in every domain of q.
func (p GTIDPos) Covers(q GTIDPos) bool {
	for d, g := range q {
		if p[d].Seq < g.Seq {
			return false
		}
	}
	return true
}

// Equal reports whether p and q are the same position.
func (p GTIDPos) Equal(q GTIDPos) bool { return p.Covers(q) && q.Covers(p) }

func (p GTIDPos) clone() GTIDPos {
	out := GTIDPos{}
	for d, v := range p {
		out[d] = v
	}
	return out
}
