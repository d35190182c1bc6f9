package backup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/store/topology"
)

// Tools are the MariaDB programs the package runs; empty fields are found
// on PATH (and in /usr/sbin, /usr/bin).
type Tools struct {
	Backup   string // mariadb-backup
	Binlog   string // mariadb-binlog
	Client   string // mariadb
	Dump     string // mariadb-dump
	Mariadbd string // mariadbd
}

func (t Tools) resolve() (Tools, error) {
	var errs []error
	find := func(p *string, names ...string) {
		if *p != "" {
			return
		}
		for _, n := range names {
			if path, err := exec.LookPath(n); err == nil {
				*p = path
				return
			}
			for _, d := range []string{"/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"} {
				if fi, err := os.Stat(filepath.Join(d, n)); err == nil && fi.Mode()&0o111 != 0 {
					*p = filepath.Join(d, n)
					return
				}
			}
		}
		errs = append(errs, fmt.Errorf("%s not found on PATH or in /usr/sbin, /usr/bin", strings.Join(names, "/")))
	}
	find(&t.Backup, "mariadb-backup", "mariabackup")
	find(&t.Binlog, "mariadb-binlog", "mysqlbinlog")
	find(&t.Client, "mariadb", "mysql")
	find(&t.Dump, "mariadb-dump", "mysqldump")
	find(&t.Mariadbd, "mariadbd", "mysqld")
	return t, errors.Join(errs...)
}

// Credentials are a MySQL user and password; the zero value means "the
// ones the map's DSN carries".
type Credentials struct {
	User, Password string
}

// ParseCredentials reads "user:password" (or "user", no password).
func ParseCredentials(s string) (Credentials, error) {
	if s == "" {
		return Credentials{}, nil
	}
	user, pass, _ := strings.Cut(s, ":")
	if user == "" {
		return Credentials{}, errors.New(`want "user:password"`)
	}
	return Credentials{User: user, Password: pass}, nil
}

// endpoint is a server reached as an administrator.
type endpoint struct {
	cfg *mysql.Config
}

func newEndpoint(dsn string, admin Credentials) (endpoint, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return endpoint{}, errors.New("DSN does not parse")
	}
	if admin.User != "" {
		c.User, c.Passwd = admin.User, admin.Password
	}
	c.DBName = ""
	return endpoint{cfg: c}, nil
}

func socketEndpoint(sock string) endpoint {
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr = "root", "unix", sock
	return endpoint{cfg: c}
}

func (e endpoint) String() string { return e.cfg.Addr }

func (e endpoint) open(ctx context.Context) (*sqlx.DB, error) {
	db, err := topology.Dial(e.cfg.FormatDSN(), 4)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", e, err)
	}
	return db, nil
}

// optionFile writes a MariaDB option file (mode 0600, in dir) reaching e,
// for the client programs and mariadb-backup, so no password is on a
// command line. The caller removes it.
func (e endpoint) optionFile(dir string) (string, error) {
	var b strings.Builder
	for _, group := range []string{"client", "mariadb-backup"} {
		fmt.Fprintf(&b, "[%s]\n", group)
		if e.cfg.Net == "unix" {
			fmt.Fprintf(&b, "socket=%s\n", e.cfg.Addr)
		} else {
			host, port, _ := strings.Cut(e.cfg.Addr, ":")
			if port == "" {
				port = "3306"
			}
			fmt.Fprintf(&b, "host=%s\nport=%s\n", host, port)
		}
		fmt.Fprintf(&b, "user=%s\n", e.cfg.User)
		if e.cfg.Passwd != "" {
			fmt.Fprintf(&b, "password=%s\n", e.cfg.Passwd)
		}
	}
	f, err := os.CreateTemp(dir, "pinstore-backup-*.cnf")
	if err != nil {
		return "", fmt.Errorf("option file: %w", err)
	}
	defer f.Close()
	if err := f.Chmod(0o600); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("option file: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("option file: %w", err)
	}
	return f.Name(), nil
}

// run runs a program, its output to log; on failure the error holds the
// output's tail.
func run(ctx context.Context, log io.Writer, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	tail := &tailBuffer{max: 2048}
	w := io.MultiWriter(tail, orDiscard(log))
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(redact(args), " "), err, tail)
	}
	return nil
}

func redact(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.HasPrefix(a, "--password") {
			a = "--password=…"
		}
		out[i] = a
	}
	return out
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

var versionRE = regexp.MustCompile(`(\d+\.\d+\.\d+)`)

// toolVersion is X.Y.Z of `prog --version` (mariadb-backup says "based on
// MariaDB server 10.11.19-MariaDB").
func toolVersion(ctx context.Context, prog string) (string, error) {
	out, err := exec.CommandContext(ctx, prog, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %v: %s", prog, err, out)
	}
	s := string(out)
	if i := strings.Index(s, "server "); i >= 0 {
		s = s[i:]
	}
	m := versionRE.FindString(s)
	if m == "" {
		return "", fmt.Errorf("%s --version: no version in %q", prog, strings.TrimSpace(string(out)))
	}
	return m, nil
}

// serverVersion is X.Y.Z of a VERSION() such as "10.11.19-MariaDB-0+deb12u1-log".
func serverVersion(v string) string { return versionRE.FindString(v) }

// lineProgress calls fn for each line written to it.
type lineProgress struct {
	mu   sync.Mutex
	part []byte
	fn   func(string)
}

func (l *lineProgress) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, p...)
	for {
		i := strings.IndexByte(string(l.part), '\n')
		if i < 0 {
			break
		}
		l.fn(string(l.part[:i]))
		l.part = l.part[i+1:]
	}
	return len(p), nil
}

// dirSize is the bytes of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// emptyTarget makes dir if it does not exist; an existing dir must be
// empty.
func emptyTarget(dir, what string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("%s %s: %w", what, dir, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("%s %s: %w", what, dir, err)
	case len(ents) > 0:
		return fmt.Errorf("%s %s is not empty (%d entries, e.g. %s): name a new or empty directory", what, dir, len(ents), ents[0].Name())
	}
	return nil
}

// checkEmpty is emptyTarget without creating anything.
func checkEmpty(dir, what string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%s %s: %w", what, dir, err)
	case len(ents) > 0:
		return fmt.Errorf("%s %s is not empty (%d entries, e.g. %s): name a new or empty directory", what, dir, len(ents), ents[0].Name())
	}
	return nil
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(ctx context.Context, src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o750)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, bufio.NewReaderSize(in, 1<<20)); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
