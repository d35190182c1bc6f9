package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/pinstore/pinstore/idcodec"
)

// UserTokenPrefix starts every user token; a service token's secret must
// not start with it.
const UserTokenPrefix = "pu1."

// MinSecretLen is the shortest server secret (PINSTORE_TOKEN_SECRET)
// accepted, in bytes.
const MinSecretLen = 32

// maxTokenLen bounds what is parsed at all.
const maxTokenLen = 512

// Token verification errors. Their text is safe to show a client: none
// holds any part of the token.
var (
	ErrMalformed  = errors.New("malformed token")
	ErrBadToken   = errors.New("invalid token")
	ErrExpired    = errors.New("the token has expired")
	ErrNoSecret   = errors.New("user tokens are not enabled on this server")
	ErrWeakSecret = errors.New("the token secret must be at least 32 bytes")
)

// UserClaims is what a user token says.
type UserClaims struct {
	UserID  uint64
	Expires time.Time // second precision
}

// Signer mints and verifies user tokens under one server secret.
type Signer struct {
	key []byte
}

// NewSigner returns a Signer for secret, ErrWeakSecret if it is shorter
// than MinSecretLen bytes. The error never holds the secret.
func NewSigner(secret []byte) (*Signer, error) {
	if len(secret) < MinSecretLen {
		return nil, ErrWeakSecret
	}
	return &Signer{key: append([]byte(nil), secret...)}, nil
}

func (s *Signer) sign(body string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Mint returns a token acting as user until exp. The user must be a
// well-formed user ID and exp in the future of now.
func (s *Signer) Mint(user uint64, exp time.Time) (string, error) {
	if !isUserID(user) {
		return "", errors.New("auth: not a user id")
	}
	if exp.Unix() <= 0 {
		return "", errors.New("auth: expiry before 1970")
	}
	body := UserTokenPrefix + strconv.FormatUint(user, 10) + "." + strconv.FormatInt(exp.Unix(), 10)
	return body + "." + s.sign(body), nil
}

func isUserID(id uint64) bool {
	p, err := idcodec.Decode(id)
	return err == nil && p.Type == idcodec.TypeUser && p.Local != 0
}

// ParseUserToken splits a token into its claims and signature without
// checking the signature. The numbers must be in canonical decimal form
// (no sign, no leading zeros), so one set of claims has exactly one
// encoding. ErrMalformed for anything else.
func ParseUserToken(tok string) (c UserClaims, body, sig string, err error) {
	if len(tok) > maxTokenLen || !strings.HasPrefix(tok, UserTokenPrefix) {
		return UserClaims{}, "", "", ErrMalformed
	}
	rest := tok[len(UserTokenPrefix):]
	parts := strings.Split(rest, ".")
	if len(parts) != 3 {
		return UserClaims{}, "", "", ErrMalformed
	}
	uid, ok := canonicalUint(parts[0])
	if !ok || !isUserID(uid) {
		return UserClaims{}, "", "", ErrMalformed
	}
	exp, ok := canonicalUint(parts[1])
	if !ok || exp == 0 || exp > 1<<62 {
		return UserClaims{}, "", "", ErrMalformed
	}
	if len(parts[2]) != base64.RawURLEncoding.EncodedLen(sha256.Size) {
		return UserClaims{}, "", "", ErrMalformed
	}
	body = tok[:len(tok)-len(parts[2])-1]
	return UserClaims{UserID: uid, Expires: time.Unix(int64(exp), 0)}, body, parts[2], nil
}

// canonicalUint parses 1..20 decimal digits without a leading zero.
func canonicalUint(s string) (uint64, bool) {
	if len(s) == 0 || len(s) > 20 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// Verify checks tok's signature (in constant time) and expiry at now and
// returns its claims. ErrMalformed, ErrBadToken (wrong signature: tampered
// or signed with another secret) or ErrExpired.
func (s *Signer) Verify(tok string, now time.Time) (UserClaims, error) {
	c, body, sig, err := ParseUserToken(tok)
	if err != nil {
		return UserClaims{}, err
	}
	want := s.sign(body)
	if subtle.ConstantTimeCompare([]byte(sig), []byte(want)) != 1 {
		return UserClaims{}, ErrBadToken
	}
	if !now.Before(c.Expires) {
		return UserClaims{}, ErrExpired
	}
	return c, nil
}
