package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pinstore/pinstore/api"
	"github.com/pinstore/pinstore/auth"
	"github.com/pinstore/pinstore/idcodec"
)

// maxSecretInput bounds what `token hash` reads from stdin.
const maxSecretInput = 4096

// runToken is `pinstore token mint|hash`.
func runToken(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	const usage = "usage: pinstore token mint --user ID [--ttl 24h] | pinstore token hash [--name NAME] [--scopes read,write] < secret"
	if helpAsked(args) {
		fmt.Fprintln(stdout, usage)
		return nil
	}
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "mint":
		return runTokenMint(args[1:], getenv, time.Now(), stdout, stderr)
	case "hash":
		return runTokenHash(args[1:], stdin, stdout, stderr)
	}
	return fmt.Errorf("unknown token command %q; %s", args[0], usage)
}

// runTokenMint prints a user token signed with PINSTORE_TOKEN_SECRET.
func runTokenMint(args []string, getenv func(string) string, now time.Time, stdout, stderr io.Writer) error {
	fs := newFlags("token mint", "token mint --user ID [--ttl 24h]\n\nprints a user token signed with PINSTORE_TOKEN_SECRET", stderr)
	user := fs.String("user", "", "the user ID the token acts as (required)")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token is valid")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("token mint: unexpected arguments %q", fs.Args())
	}
	if *user == "" {
		return errors.New("token mint: --user is required")
	}
	id, p, err := idcodec.Parse(*user)
	if err != nil || p.Type != idcodec.TypeUser || p.Local == 0 {
		return fmt.Errorf("token mint: --user %q is not a user ID", *user)
	}
	if *ttl <= 0 {
		return fmt.Errorf("token mint: --ttl must be positive")
	}
	secret := readAuthEnv(getenv).tokenSecret
	if secret == "" {
		return errors.New("token mint: PINSTORE_TOKEN_SECRET is not set (the server's user token secret)")
	}
	signer, err := auth.NewSigner([]byte(secret))
	if err != nil {
		return fmt.Errorf("token mint: PINSTORE_TOKEN_SECRET: %w", err)
	}
	exp := now.Add(*ttl)
	tok, err := signer.Mint(id, exp)
	if err != nil {
		return fmt.Errorf("token mint: %w", err)
	}
	fmt.Fprintln(stdout, tok)
	fmt.Fprintf(stderr, "token for %s, valid until %s\n", auth.UserName(id), time.Unix(exp.Unix(), 0).UTC().Format(time.RFC3339))
	return nil
}

// runTokenHash reads a service token's secret on stdin (one line) and
// prints its tokens-file entry.
func runTokenHash(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("token hash", "token hash [--name N] [--scopes read,write,admin] < secret\n\nprints the tokens-file line for the service token whose secret is on stdin", stderr)
	name := fs.String("name", "service", "the token's name, as logs will show it")
	scopes := fs.String("scopes", "read", "comma-separated scopes among read, write, admin")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("token hash: unexpected arguments (the secret goes on stdin, never on the command line)")
	}
	sc, err := auth.ParseScopes(*scopes)
	if err != nil {
		return fmt.Errorf("token hash: --scopes: %w", err)
	}
	if _, err := auth.ParseServiceTokens([]byte(auth.HashLine(*name, sc, "x"))); err != nil {
		return fmt.Errorf("token hash: --name %q must be 1-64 characters of [A-Za-z0-9._-]", *name)
	}
	b, err := io.ReadAll(io.LimitReader(stdin, maxSecretInput+1))
	if err != nil {
		return fmt.Errorf("token hash: reading stdin: %w", err)
	}
	if len(b) > maxSecretInput {
		return fmt.Errorf("token hash: the secret is longer than %d bytes", maxSecretInput)
	}
	secret := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if secret == "" {
		return errors.New("token hash: no secret on stdin")
	}
	if strings.HasPrefix(secret, auth.UserTokenPrefix) {
		return fmt.Errorf("token hash: a service token may not start with %q (user tokens do)", auth.UserTokenPrefix)
	}
	if !auth.TokenSyntaxOK(secret) {
		return errors.New("token hash: the secret may hold only A-Z a-z 0-9 - . _ ~ + / = (it travels in an Authorization header)")
	}
	if len(secret) < 32 {
		fmt.Fprintln(stderr, "token hash: warning: the secret is shorter than 32 characters; prefer e.g. `openssl rand -base64 32`")
	}
	fmt.Fprintln(stdout, auth.HashLine(*name, sc, secret))
	return nil
}

// authConfig is the serve command's authentication, from the environment.
type authConfig struct {
	dev       bool
	auth      *auth.Authenticator // nil when auth is off (development mode only)
	rate      float64
	burst     int
	services  int
	userToken bool
}

// serveAuth reads the authentication configuration (PINSTORE_TOKENS_FILE,
// PINSTORE_TOKEN_SECRET, PINSTORE_RATE_LIMIT, PINSTORE_RATE_BURST,
// PINSTORE_DEV) and checks it against the listen address. Without any
// token it refuses, unless PINSTORE_DEV=true; development mode listens on
// loopback only. It returns the middleware for api.Config.Auth, nil when
// auth is off, and the Authenticator (whose service tokens serve reloads).
// Errors never hold a secret.
func serveAuth(env authEnv, addr string, logger *slog.Logger) (func(http.Handler) http.Handler, *auth.Authenticator, error) {
	c, err := loadAuthConfig(env, addr)
	if err != nil {
		return nil, nil, fmt.Errorf("serve: %w", err)
	}
	if c.auth == nil {
		logger.Warn("AUTHENTICATION IS OFF: development mode (PINSTORE_DEV=true) without PINSTORE_TOKENS_FILE or PINSTORE_TOKEN_SECRET; every request is served unauthenticated, on loopback only",
			"addr", addr)
		return nil, nil, nil
	}
	if c.dev {
		logger.Warn("development mode (PINSTORE_DEV=true): listening on loopback only", "addr", addr)
	}
	logger.Info("authentication on", "service_tokens", c.services, "user_tokens", c.userToken, "rate_limit_per_s", c.rate, "rate_burst", c.burst)
	return auth.Middleware(c.auth, api.AuthFailure(logger)), c.auth, nil
}

func loadAuthConfig(env authEnv, addr string) (authConfig, error) {
	var c authConfig
	dev, err := parseBool("PINSTORE_DEV", env.dev, false)
	if err != nil {
		return c, err
	}
	c.dev = dev
	if c.dev && !loopbackAddr(addr) {
		return c, fmt.Errorf("development mode (PINSTORE_DEV=true) listens on loopback only; --addr %q is not a loopback address (use 127.0.0.1:PORT)", addr)
	}
	c.rate, c.burst = auth.DefaultRate, 0
	if v := env.rateLimit; v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 || r != r {
			return c, fmt.Errorf("PINSTORE_RATE_LIMIT: %q is not a number of requests per second (0: no limit)", v)
		}
		c.rate = r
	}
	if v := env.rateBurst; v != "" {
		b, err := strconv.Atoi(v)
		if err != nil || b < 1 {
			return c, fmt.Errorf("PINSTORE_RATE_BURST: %q is not a positive integer (leave it unset for twice the rate; PINSTORE_RATE_LIMIT=0 turns limiting off)", v)
		}
		c.burst = b
	}
	if c.burst == 0 { // unset: twice the rate, so a token may briefly double its rate
		c.burst = max(1, int(2*c.rate))
	}
	cfg := auth.Config{Rate: c.rate, Burst: c.burst}
	if path := env.tokensFile; path != "" {
		st, err := auth.LoadServiceTokens(path)
		if err != nil {
			return c, fmt.Errorf("PINSTORE_TOKENS_FILE: %w", err)
		}
		cfg.Service = st
		c.services = st.Len()
	}
	if s := env.tokenSecret; s != "" {
		cfg.UserSecret = []byte(s)
		c.userToken = true
	}
	if cfg.Service == nil && cfg.UserSecret == nil {
		if c.dev {
			return c, nil
		}
		return c, errors.New("no tokens configured: set PINSTORE_TOKENS_FILE (service tokens) and/or PINSTORE_TOKEN_SECRET (user tokens), or PINSTORE_DEV=true to run without authentication on loopback")
	}
	a, err := auth.New(cfg)
	if err != nil {
		if errors.Is(err, auth.ErrWeakSecret) {
			return c, fmt.Errorf("PINSTORE_TOKEN_SECRET: %w", err)
		}
		return c, err
	}
	c.auth = a
	return c, nil
}

// loopbackAddr reports whether a listen address names a loopback host
// (127.0.0.0/8, ::1 or localhost); ":8080" (every interface) is not.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
