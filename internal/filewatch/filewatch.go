// Package filewatch notices, by polling, when the content of a file an
// operator edits in place or replaces (the shard map, the tokens file)
// has changed.
//
// A poll stats the path afresh (editors and tools replace files rather
// than rewrite them); when size, mtime or inode changed, or the mtime is
// recent enough that a rewrite could keep them all (git's "racy" rule),
// it reads the file and compares a SHA-256 of its content with the last
// one seen. Only new content is handed back, so a caller parses a file
// once per change, and logs a bad file once rather than at every poll.
package filewatch

import (
	"crypto/sha256"
	"fmt"
	"os"
	"syscall"
	"time"
)

// racyWindow: a file whose mtime is this recent may be rewritten with the
// same size and mtime (coarse file-system clocks), so it is re-read and
// hashed even when its stat looks unchanged.
const racyWindow = 2 * time.Second

// File watches one path. It is not safe for concurrent use: one
// goroutine polls it.
type File struct {
	path    string
	stamp   stamp
	hash    [sha256.Size]byte
	seen    bool   // hash is valid
	lastErr string // last read error returned, to return each once
}

// New watches path. The first Changed returns its content.
func New(path string) *File { return &File{path: path} }

// Path is the watched path.
func (f *File) Path() string { return f.path }

// Changed returns the file's content and true when it differs from the
// content Changed last returned (or was never returned). A stat or read
// error is returned once per distinct message, then (nil, false, nil)
// while it lasts, so a caller can log every error it gets.
func (f *File) Changed() ([]byte, bool, error) {
	fi, err := os.Stat(f.path)
	if err != nil {
		return nil, false, f.readError(err)
	}
	st := stampOf(fi)
	if f.seen && st == f.stamp && time.Since(st.mtime) > racyWindow {
		return nil, false, nil
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, false, f.readError(err)
	}
	f.lastErr = ""
	f.stamp = st
	h := sha256.Sum256(data)
	if f.seen && h == f.hash {
		return nil, false, nil
	}
	f.hash, f.seen = h, true
	return data, true, nil
}

// Forget makes the next Changed read the file and return its content even
// when it has not changed (a caller whose use of the last content did not
// take effect).
func (f *File) Forget() { f.seen = false }

func (f *File) readError(err error) error {
	msg := err.Error()
	if msg == f.lastErr {
		return nil
	}
	f.lastErr = msg
	return err
}

// stamp is what a poll compares cheaply before reading the file.
type stamp struct {
	size  int64
	mtime time.Time
	ino   string
}

func stampOf(fi os.FileInfo) stamp {
	st := stamp{size: fi.Size(), mtime: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = fmt.Sprintf("%d:%d", sys.Dev, sys.Ino)
	}
	return st
}
