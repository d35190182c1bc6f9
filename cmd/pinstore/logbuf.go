package main

import (
	"io"
	"sync"
	"time"
)

// lineBuffer batches log records into fewer writes: one write per record
// costs a system call per request at high rates. Every Write from a slog
// handler is one whole record, so the buffer only ever holds whole lines
// and lines from other writers to the same file never interleave inside
// one. It writes out every interval, when it holds more than limit bytes,
// and on Close.
type lineBuffer struct {
	mu    sync.Mutex
	w     io.Writer
	buf   []byte
	limit int
	stop  chan struct{}
	done  chan struct{}
}

func newLineBuffer(w io.Writer, every time.Duration, limit int) *lineBuffer {
	b := &lineBuffer{w: w, limit: limit, buf: make([]byte, 0, 2*limit), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-t.C:
				b.Flush()
			}
		}
	}()
	return b
}

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) >= b.limit {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes out what is buffered.
func (b *lineBuffer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

func (b *lineBuffer) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.w.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// Close stops the timer and writes out what is left.
func (b *lineBuffer) Close() error {
	close(b.stop)
	<-b.done
	return b.Flush()
}
