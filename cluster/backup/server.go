package backup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"
)

// scratch is a mariadbd this package started on a restored data directory:
// no network (a socket of its own), no privilege checks, no binary log, no
// replication, so nothing but this package reaches it.
type scratch struct {
	datadir string
	sockDir string
	sock    string
	cmd     *exec.Cmd
	exited  chan struct{}
	err     error
	db      *sqlx.DB
}

const scratchErrLog = "pinstore-restore.err"

// startScratch starts mariadbd on datadir with srv's layout and waits
// until it answers.
func startScratch(ctx context.Context, tools Tools, datadir string, srv Server) (*scratch, error) {
	sockDir, err := os.MkdirTemp("", "pinstore-restore-")
	if err != nil {
		return nil, fmt.Errorf("scratch server: %w", err)
	}
	s := &scratch{datadir: datadir, sockDir: sockDir, sock: filepath.Join(sockDir, "mysqld.sock"), exited: make(chan struct{})}
	args := []string{
		"--no-defaults",
		"--datadir=" + datadir,
		"--tmpdir=" + sockDir,
		"--socket=" + s.sock,
		"--pid-file=" + filepath.Join(sockDir, "mysqld.pid"),
		"--log-error=" + filepath.Join(datadir, scratchErrLog),
		"--skip-networking",
		"--skip-grant-tables",
		"--skip-log-bin",
		"--skip-slave-start",
		"--innodb-buffer-pool-size=128M",
		"--innodb-page-size=" + strconv.Itoa(srv.PageSize),
		"--innodb-data-file-path=" + srv.DataFilePath,
		"--innodb-undo-tablespaces=" + strconv.Itoa(srv.UndoTablespaces),
		"--character-set-server=" + srv.CharacterSet,
		"--collation-server=" + srv.Collation,
		"--lower-case-table-names=" + strconv.Itoa(srv.LowerCaseTableNm),
		"--performance-schema=0",
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	s.cmd = exec.Command(tools.Mariadbd, args...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(sockDir)
		return nil, fmt.Errorf("scratch server: %w", err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		select {
		case <-s.exited:
			os.RemoveAll(sockDir)
			return nil, fmt.Errorf("mariadbd on %s exited during start-up (%v); the end of its log %s:\n%s", datadir, s.err, filepath.Join(datadir, scratchErrLog), tail(filepath.Join(datadir, scratchErrLog)))
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if _, err := os.Stat(s.sock); err != nil {
			if time.Now().After(deadline) {
				s.stop()
				return nil, fmt.Errorf("mariadbd on %s did not start in 5 minutes; the end of its log:\n%s", datadir, tail(filepath.Join(datadir, scratchErrLog)))
			}
			continue
		}
		db, err := socketEndpoint(s.sock).open(ctx)
		if err == nil {
			s.db = db
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("mariadbd on %s does not answer: %v", datadir, err)
		}
	}
}

// stop shuts the server down cleanly (SIGTERM; SIGKILL after a minute).
func (s *scratch) stop() error {
	if s.db != nil {
		s.db.Close()
	}
	defer os.RemoveAll(s.sockDir)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return errors.New("mariadbd did not stop within a minute: killed")
	}
	return nil
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return string(b)
}
