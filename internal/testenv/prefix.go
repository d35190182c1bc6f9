package testenv

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

var (
	baseRe   = regexp.MustCompile(`^[a-z][a-z0-9]{0,8}$`)
	prefixRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,15}$`)
)

var (
	prefixStart sync.Once
	prefixSeq   atomic.Uint32
)

// UniquePrefix returns a database-name prefix unique to this call:
// base, 6 random hex digits and "_", e.g. "store3fa91c_". base must match
// ^[a-z][a-z0-9]{0,8}$ ("" means "t"); the result always matches
// ^[a-z][a-z0-9_]{0,15}$ and ends in "_", so names built from it can never be
// a real shard ("db%05d"). Register [DropDatabases] with tb.Cleanup to remove
// what the test creates.
func UniquePrefix(tb testing.TB, base string) string {
	tb.Helper()
	if base == "" {
		base = "t"
	}
	if !baseRe.MatchString(base) {
		tb.Fatalf("testenv.UniquePrefix: base %q must match %s", base, baseRe)
		return ""
	}
	// A random start per process plus a counter: never the same suffix
	// twice in one process (24 random bits alone repeated within a few
	// hundred calls now and then), and unlikely across processes.
	prefixStart.Do(func() {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			tb.Fatalf("testenv.UniquePrefix: %v", err)
		}
		prefixSeq.Store(binary.BigEndian.Uint32(b[:]))
	})
	v := prefixSeq.Add(1) & 0xFFFFFF
	return base + hex.EncodeToString([]byte{byte(v >> 16), byte(v >> 8), byte(v)}) + "_"
}

// checkPrefix accepts only prefixes of UniquePrefix's shape, the ones that
// can never match a real shard or key: the guard of every drop.
func checkPrefix(prefix string) error {
	if !prefixRe.MatchString(prefix) || !strings.HasSuffix(prefix, "_") {
		return fmt.Errorf("prefix %q must match %s and end in \"_\"", prefix, prefixRe)
	}
	return nil
}
