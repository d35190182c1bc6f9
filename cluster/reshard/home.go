package reshard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pinstore/pinstore/internal/atomicfile"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// Home is where the shard map the servers follow lives: the map file
// (FileHome) or etcd (package etcdtopo). A move reads and changes the map,
// and records its own state, only through it.
type Home interface {
	// ReadMap reads and validates the map (shards and prefix are the
	// defaults the servers assume) and returns it with an opaque revision.
	ReadMap(ctx context.Context, shards int, prefix string) (*shardmap.Map, string, error)
	// WriteMap replaces the map read at revision rev by m, which has
	// validated, and returns the new revision. A map changed since rev is
	// EConflict and nothing is written. note says who wrote it and why.
	WriteMap(ctx context.Context, m *shardmap.Map, rev, note string) (string, error)
	// LockMoves takes the lock of moves on this map (EConflict when a
	// running move-shards holds it) and returns it with the state of the
	// move in progress, if any.
	LockMoves(ctx context.Context) (MoveLock, error)
	// String names the map for messages.
	String() string
}

// MoveLock is the held lock of moves with the state of the move in
// progress.
type MoveLock interface {
	// State is the recorded move, empty when none is in progress.
	State() []byte
	// Save records the move's state; Remove deletes it (the move is over).
	Save(ctx context.Context, state []byte) error
	Remove(ctx context.Context) error
	// Unlock releases the lock; the recorded state stays.
	Unlock()
	// String names where the state is kept, for messages.
	String() string
}

// FileHome is the map file at path: its revision is a hash of the file's
// content; the lock of moves is the file LockPath(path), flocked while a
// move-shards runs and holding the state of the move in progress.
func FileHome(path string) Home { return fileHome(path) }

type fileHome string

func (h fileHome) String() string { return string(h) }

func (h fileHome) ReadMap(_ context.Context, shards int, prefix string) (*shardmap.Map, string, error) {
	data, err := os.ReadFile(string(h))
	if err != nil {
		return nil, "", fmt.Errorf("shard map: %w", err)
	}
	m, err := shardmap.Parse(data, shards, prefix)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", h, err)
	}
	return m, contentRev(data), nil
}

func contentRev(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// WriteMap re-reads the file and compares its content with rev just before
// it atomically replaces it (temp file, fsync, rename, fsync of the
// directory): a reader sees the old map or the new one, never a mix. An
// editor saving in the instant between the compare and the rename is not
// caught: the file has no revisions to compare and swap on (etcd has).
//
// The file is edited, not replaced (shardmap.Edit): only the values that
// changed are rewritten, and the operator's comments and layout stay. A
// YAML file's first line then says who rewrote it last and why (note),
// replacing the line an earlier rewrite put there; a JSON file, which has
// no comments, stays JSON.
func (h fileHome) WriteMap(_ context.Context, m *shardmap.Map, rev, note string) (string, error) {
	cur, err := os.ReadFile(string(h))
	if err != nil {
		return "", fmt.Errorf("shard map: %w", err)
	}
	if contentRev(cur) != rev {
		return "", model.Errorf(model.EConflict, "the shard map file %s changed since it was read: nothing written; read it again", h)
	}
	data, err := editedMap(cur, m, note)
	if err != nil {
		return "", err
	}
	if err := atomicfile.Write(string(h), data); err != nil {
		return "", err
	}
	return contentRev(data), nil
}

// notePrefix starts the line a rewrite of a YAML map file puts first.
const notePrefix = "# Shard map. "

// editedMap is the map file cur edited to say m, with note in its first
// line (YAML); the canonical form when the file's text cannot be kept.
func editedMap(cur []byte, m *shardmap.Map, note string) ([]byte, error) {
	noteLine := notePrefix + strings.ReplaceAll(note, "\n", " ") + "\n"
	body, err := shardmap.Edit(cur, m)
	if err != nil {
		if body, err = m.Marshal(); err != nil {
			return nil, err
		}
		return append([]byte(noteLine), body...), nil
	}
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '{' {
		return body, nil // JSON: no comments
	}
	if first, rest, ok := bytes.Cut(body, []byte("\n")); ok && bytes.HasPrefix(first, []byte(notePrefix+"Rewritten by ")) {
		body = rest
	}
	return append([]byte(noteLine), body...), nil
}

// LockPath is the lock file of the moves of the map at mapFile. It exists
// while a move of that map is in progress (see the package comment).
func LockPath(mapFile string) string { return mapFile + ".move" }

func (h fileHome) LockMoves(context.Context) (MoveLock, error) {
	return openFileLock(LockPath(string(h)))
}

// fileLock is the open, flocked lock file.
type fileLock struct {
	f     *os.File
	path  string
	state []byte
}

// openFileLock opens (creating it empty) and flocks the lock file at path,
// and reads the move it records. Another process holding it is EConflict.
func openFileLock(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, model.Errorf(model.EConflict, "another pinstore move-shards is running (it holds %s)", path)
		}
		return nil, err
	}
	l := &fileLock{f: f, path: path}
	data, err := io.ReadAll(f)
	if err != nil {
		l.Unlock()
		return nil, err
	}
	if len(strings.TrimSpace(string(data))) > 0 {
		l.state = data
	}
	return l, nil
}

func (l *fileLock) String() string { return l.path }
func (l *fileLock) State() []byte  { return l.state }

// Save rewrites the lock file in place (it must keep its inode: the flock
// is on it) and syncs it.
func (l *fileLock) Save(_ context.Context, b []byte) error {
	b = append([]byte("# pinstore move-shards in progress: run the same command again to finish it,\n# or with --abort to roll it back. Do not delete this file while the map\n# shows the range read-only or on the target.\n"), b...)
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	if _, err := l.f.WriteAt(b, 0); err != nil {
		return err
	}
	l.state = b
	return l.f.Sync()
}

// Remove deletes the lock file (the move is over) while still holding it.
func (l *fileLock) Remove(context.Context) error {
	err := os.Remove(l.path)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if err == nil {
		err = atomicfile.SyncDir(filepath.Dir(l.path))
	}
	l.state = nil
	return err
}

func (l *fileLock) Unlock() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}
