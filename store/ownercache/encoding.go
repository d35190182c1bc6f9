package ownercache

import "strconv"

// BucketSize is the number of consecutive pin IDs that share one Redis hash.
// Redis keeps a hash in its compact listpack encoding only while it has at
// most hash-max-listpack-entries fields, so that setting must be at least
// BucketSize (see CheckConfig).
const BucketSize = 1000

// bucketKeyLen is the length of the encoded bucket number in a key. A pin ID
// has its two reserved bits clear, so its bucket is below 2^62/1000 < 2^53
// and nine 6-bit digits hold every bucket. (IDs with reserved bits set are
// never keyed: the cache treats them as misses.)
const bucketKeyLen = 9

// keyDigits is a 64-symbol alphabet in ASCII order, so fixed-width keys sort
// like the bucket numbers they encode. It holds no '{' or '}', so a key never
// carries an accidental Redis Cluster hash tag.
const keyDigits = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"

// Owner value encoding. See the package documentation.
const (
	userType      = 3
	shardBits     = 16
	localBits     = 36
	typeShift     = localBits
	shardShift    = localBits + 10
	shardMask     = 1<<shardBits - 1
	localMask     = 1<<localBits - 1
	reservedMask  = uint64(3) << 62
	userTypeBits  = uint64(userType) << typeShift
	maxCompactLen = 7 // local<<16 | shard < 2^52 fits in 7 bytes
	rawLen        = 8
)

// bucketOf returns the bucket of pin and the pin's position inside it.
func bucketOf(pin uint64) (bucket uint64, pos int) {
	return pin / BucketSize, int(pin % BucketSize)
}

// appendKey appends the Redis key of bucket to dst: prefix followed by the
// bucket number as nine base-64 digits, most significant first.
func appendKey(dst []byte, prefix string, bucket uint64) []byte {
	dst = append(dst, prefix...)
	for i := bucketKeyLen - 1; i >= 0; i-- {
		dst = append(dst, keyDigits[bucket>>(6*uint(i))&63])
	}
	return dst
}

// parseKeyBucket is the inverse of appendKey's bucket part. It reports false
// for a string that appendKey cannot have produced.
func parseKeyBucket(s string) (uint64, bool) {
	if len(s) != bucketKeyLen {
		return 0, false
	}
	var b uint64
	for i := 0; i < len(s); i++ {
		d := digitValue(s[i])
		if d < 0 {
			return 0, false
		}
		b = b<<6 | uint64(d)
	}
	return b, true
}

func digitValue(c byte) int {
	switch {
	case c == '-':
		return 0
	case c >= '0' && c <= '9':
		return int(c-'0') + 1
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 11
	case c == '_':
		return 37
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 38
	}
	return -1
}

// fieldName returns the hash field of a position inside a bucket: its
// decimal form, which Redis stores as a listpack integer.
func fieldName(pos int) string { return strconv.Itoa(pos) }

// appendOwner appends the encoded owner to dst. A user ID (type 3, reserved
// bits clear) becomes u = local<<16 | shard as 1–7 big-endian bytes with no
// leading zero bytes; any other non-zero value becomes its 8 raw big-endian
// bytes. The length tells the decoder which form it reads.
func appendOwner(dst []byte, owner uint64) []byte {
	if owner&reservedMask == 0 && owner>>typeShift&1023 == userType {
		u := (owner&localMask)<<shardBits | owner>>shardShift&shardMask
		n := 1
		for v := u >> 8; v != 0; v >>= 8 {
			n++
		}
		for i := n - 1; i >= 0; i-- {
			dst = append(dst, byte(u>>(8*uint(i))))
		}
		return dst
	}
	for i := rawLen - 1; i >= 0; i-- {
		dst = append(dst, byte(owner>>(8*uint(i))))
	}
	return dst
}

// decodeOwner is the inverse of appendOwner. It reports false for a value
// appendOwner cannot have produced (empty, longer than 8 bytes, a local id
// that does not fit 36 bits, or zero), which the cache treats as a miss.
func decodeOwner(s string) (uint64, bool) {
	if len(s) == 0 || len(s) > rawLen {
		return 0, false
	}
	var u uint64
	for i := 0; i < len(s); i++ {
		u = u<<8 | uint64(s[i])
	}
	if len(s) == rawLen {
		return u, u != 0
	}
	local := u >> shardBits
	if local > localMask {
		return 0, false
	}
	return (u&shardMask)<<shardShift | userTypeBits | local, true
}
