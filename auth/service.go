package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ServiceToken is one entry of the tokens file.
type ServiceToken struct {
	Name   string
	Hash   [sha256.Size]byte // SHA-256 of the secret
	Scopes Scope
}

// ServiceTokens is the parsed tokens file: the service tokens the server
// accepts, by the hash of their secret.
type ServiceTokens struct {
	tokens []ServiceToken
}

// Len is the number of tokens.
func (s *ServiceTokens) Len() int {
	if s == nil {
		return 0
	}
	return len(s.tokens)
}

// Tokens returns a copy of the entries.
func (s *ServiceTokens) Tokens() []ServiceToken {
	if s == nil {
		return nil
	}
	return append([]ServiceToken(nil), s.tokens...)
}

// tokenEntry is an entry as written in the file.
type tokenEntry struct {
	Name   string   `yaml:"name"`
	SHA256 string   `yaml:"sha256"`
	Scopes []string `yaml:"scopes"`
}

// tokensFile is the file: {"tokens": [...]}; a bare list is accepted too.
type tokensFile struct {
	Tokens []tokenEntry `yaml:"tokens"`
}

// maxNameLen bounds a token name, which appears in every log line.
const maxNameLen = 64

// validName: 1..64 characters of [A-Za-z0-9._-], so a name is safe to log
// and can never be mistaken for a user principal ("user:…").
func validName(s string) bool {
	if len(s) == 0 || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// ParseServiceTokens parses a tokens file, YAML or JSON:
//
//	tokens:
//	  - name: feed-backend          # [A-Za-z0-9._-]{1,64}, unique
//	    sha256: 9f86d0…             # hex SHA-256 of the secret, unique
//	    scopes: [read, write]       # among read, write, admin
//
// A top-level list of entries is accepted as well. Unknown fields are
// errors, so a misspelt "scopes" can't silently grant nothing (or more).
// Errors name the entry by index and name, never by hash.
func ParseServiceTokens(data []byte) (*ServiceTokens, error) {
	var entries []tokenEntry
	var f tokensFile
	if err := decodeYAMLStrict(data, &f); err == nil {
		entries = f.Tokens
	} else if err2 := decodeYAMLStrict(data, &entries); err2 != nil {
		return nil, fmt.Errorf("auth: tokens file: %w", err)
	}
	out := &ServiceTokens{}
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]string{}
	for i, e := range entries {
		where := fmt.Sprintf("auth: tokens file: entry %d", i)
		if !validName(e.Name) {
			return nil, fmt.Errorf("%s: name %q must be 1-%d characters of [A-Za-z0-9._-]", where, e.Name, maxNameLen)
		}
		where += fmt.Sprintf(" (%s)", e.Name)
		if names[e.Name] {
			return nil, fmt.Errorf("%s: the name is used twice", where)
		}
		names[e.Name] = true
		h := strings.ToLower(strings.TrimSpace(e.SHA256))
		raw, err := hex.DecodeString(h)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("%s: sha256 must be 64 hex digits (the hash from `pinstore token hash`, never the secret)", where)
		}
		var t ServiceToken
		t.Name = e.Name
		copy(t.Hash[:], raw)
		if other, dup := hashes[t.Hash]; dup {
			return nil, fmt.Errorf("%s: same secret as %s", where, other)
		}
		hashes[t.Hash] = e.Name
		if len(e.Scopes) == 0 {
			return nil, fmt.Errorf("%s: no scopes (want some of read, write, admin)", where)
		}
		for _, s := range e.Scopes {
			sc, ok := ParseScope(s)
			if !ok {
				return nil, fmt.Errorf("%s: unknown scope %q (want read, write or admin)", where, s)
			}
			t.Scopes |= sc
		}
		out.tokens = append(out.tokens, t)
	}
	if len(out.tokens) == 0 {
		return nil, errors.New("auth: tokens file lists no tokens")
	}
	return out, nil
}

func decodeYAMLStrict(data []byte, v any) error {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	return dec.Decode(v)
}

// LoadServiceTokens reads and parses the tokens file at path.
func LoadServiceTokens(path string) (*ServiceTokens, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	t, err := ParseServiceTokens(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return t, nil
}

// HashSecret is the SHA-256 of a service token's secret, as the tokens
// file lists it.
func HashSecret(secret string) [sha256.Size]byte { return sha256.Sum256([]byte(secret)) }

// HashLine is the tokens-file entry, as one YAML flow line, for a secret.
func HashLine(name string, scopes Scope, secret string) string {
	h := HashSecret(secret)
	return fmt.Sprintf("- {name: %s, sha256: %s, scopes: [%s]}", name, hex.EncodeToString(h[:]), strings.Join(scopes.Names(), ", "))
}

// Lookup returns the token whose hash is the secret's. It hashes the
// secret once and compares it with every entry in constant time, without
// stopping at a match, so timing tells nothing about which entry (or how
// much of a hash) matched.
func (s *ServiceTokens) Lookup(secret string) (ServiceToken, bool) {
	if s == nil {
		return ServiceToken{}, false
	}
	h := HashSecret(secret)
	found := -1
	for i := range s.tokens {
		eq := subtle.ConstantTimeCompare(h[:], s.tokens[i].Hash[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return ServiceToken{}, false
	}
	return s.tokens[found], true
}
