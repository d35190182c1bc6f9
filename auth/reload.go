package auth

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/pinstore/pinstore/internal/filewatch"
)

// DefaultTokensPoll is how often WatchServiceTokens looks at the tokens
// file unless told otherwise.
const DefaultTokensPoll = 2 * time.Second

// SetServiceTokens puts t in force: requests authenticated from now on
// are checked against t only. Requests in flight keep the principal they
// got. t must hold at least one token (ParseServiceTokens guarantees it).
func (a *Authenticator) SetServiceTokens(t *ServiceTokens) error {
	if t.Len() == 0 {
		return errors.New("auth: SetServiceTokens: no tokens")
	}
	a.setService(t) // and forget the tokens verified under the old ones
	return nil
}

// ReloadServiceTokens reads and parses the tokens file at path and puts
// it in force. A file that can't be read or parsed changes nothing: the
// tokens in force stay, and the error says why.
func (a *Authenticator) ReloadServiceTokens(path string) (*ServiceTokens, error) {
	t, err := LoadServiceTokens(path)
	if err != nil {
		return nil, err
	}
	return t, a.SetServiceTokens(t)
}

// WatchServiceTokens polls the tokens file at path every interval
// (DefaultTokensPoll when every <= 0) until ctx is done, as the shard map
// is watched (internal/filewatch): new content is parsed and put in force
// and logged as "service tokens reloaded" with the token names; a file
// that does not parse (or can't be read) is logged at ERROR once per
// distinct content, and the tokens in force stay.
func (a *Authenticator) WatchServiceTokens(ctx context.Context, path string, every time.Duration, logger *slog.Logger) {
	if every <= 0 {
		every = DefaultTokensPoll
	}
	f := filewatch.New(path)
	tk := time.NewTicker(every)
	defer tk.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
		data, changed, err := f.Changed()
		if err != nil {
			logger.Error("tokens file unreadable; keeping the service tokens in force", "file", path, "error", err.Error(), "tokens", a.state.Load().service.Len())
		}
		if !changed {
			continue
		}
		t, err := ParseServiceTokens(data)
		if err == nil {
			err = a.SetServiceTokens(t)
		}
		if err != nil {
			logger.Error("tokens file rejected; keeping the service tokens in force", "file", path, "error", err.Error(), "tokens", a.state.Load().service.Len())
			continue
		}
		if !first { // the first read is (most likely) what the server started with
			logger.Info("service tokens reloaded", "file", path, "tokens", t.Len(), "names", t.Names())
		}
	}
}

// Names are the token names, in file order (safe to log: never a hash).
func (s *ServiceTokens) Names() []string {
	if s == nil {
		return nil
	}
	out := make([]string, len(s.tokens))
	for i, t := range s.tokens {
		out[i] = t.Name
	}
	return out
}
