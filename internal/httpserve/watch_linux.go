package httpserve

import (
	"encoding/binary"
	"errors"

	"golang.org/x/sys/unix"
)

// watcher learns, through an epoll instance of its own, when the client of
// a connection closes or resets it: EPOLLRDHUP (the client shut its
// side), EPOLLHUP or EPOLLERR. Each connection is registered once, when it
// is accepted, and only for those events, so a request costs the watcher
// nothing and data arriving (a pipelined request) does not wake it; the
// registration fires once (EPOLLONESHOT) and is removed when the
// connection closes. Go's own poller keeps the descriptor in its epoll
// instance as before: a descriptor may be in several.
type watcher struct {
	epfd int
	wake int // an eventfd that ends run
}

// wakeID is the id of the eventfd in the epoll instance; connections' ids
// start at 1.
const wakeID = 0

func newWatcher() (*watcher, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = unix.Close(epfd)
		return nil, err
	}
	w := &watcher{epfd: epfd, wake: wake}
	if err := w.ctl(unix.EPOLL_CTL_ADD, wake, unix.EPOLLIN, wakeID); err != nil {
		_ = unix.Close(wake)
		_ = unix.Close(epfd)
		return nil, err
	}
	return w, nil
}

func (w *watcher) ctl(op, fd int, events uint32, id uint64) error {
	ev := unix.EpollEvent{Events: events}
	ev.Fd, ev.Pad = int32(uint32(id)), int32(uint32(id>>32))
	return unix.EpollCtl(w.epfd, op, fd, &ev)
}

// add watches the connection id on fd.
func (w *watcher) add(fd int, id uint64) error {
	return w.ctl(unix.EPOLL_CTL_ADD, fd, unix.EPOLLRDHUP|unix.EPOLLONESHOT, id)
}

// remove stops watching fd, before it is closed.
func (w *watcher) remove(fd int) {
	_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, fd, nil)
}

// run calls gone with the id of each connection whose client went away,
// until close.
func (w *watcher) run(gone func(id uint64)) {
	defer unix.Close(w.epfd)
	defer unix.Close(w.wake)
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(w.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == wakeID {
				return
			}
			gone(id)
		}
	}
}

// close ends run, which closes the epoll instance.
func (w *watcher) close() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(w.wake, one[:])
}
