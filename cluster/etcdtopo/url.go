package etcdtopo

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// DefaultPrefix is the key prefix when the URL names none.
const DefaultPrefix = "/pinstore"

// URL is a parsed topology URL:
//
//	etcd://[user:password@]host:port[,host:port…][/prefix]
//
// Endpoints are plain host:port (etcd's client port, usually 2379); the
// path is the key prefix, DefaultPrefix when empty.
type URL struct {
	Endpoints []string
	Prefix    string // starts with "/", no trailing "/"
	Username  string
	Password  string
}

// ParseURL reads a topology URL. The error says what is wrong and never
// echoes a password.
func ParseURL(s string) (URL, error) {
	var u URL
	rest, ok := strings.CutPrefix(s, "etcd://")
	if !ok {
		return u, fmt.Errorf("topology URL %q: want etcd://host:port[,host:port…]/prefix", redactURL(s))
	}
	hosts, prefix, _ := strings.Cut(rest, "/")
	if at := strings.LastIndex(hosts, "@"); at >= 0 {
		user, pass, _ := strings.Cut(hosts[:at], ":")
		var err1, err2 error
		u.Username, err1 = url.PathUnescape(user)
		u.Password, err2 = url.PathUnescape(pass)
		if err1 != nil || err2 != nil || u.Username == "" {
			return u, fmt.Errorf("topology URL %q: malformed user:password", redactURL(s))
		}
		hosts = hosts[at+1:]
	}
	for _, h := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(strings.TrimSpace(h))
		if err != nil || host == "" {
			return u, fmt.Errorf("topology URL %q: endpoint %q is not host:port", redactURL(s), h)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return u, fmt.Errorf("topology URL %q: endpoint %q has no valid port", redactURL(s), h)
		}
		u.Endpoints = append(u.Endpoints, net.JoinHostPort(host, port))
	}
	if strings.ContainsAny(prefix, "?#") {
		return u, fmt.Errorf("topology URL %q: the path is the key prefix; no query or fragment", redactURL(s))
	}
	u.Prefix = path.Clean("/" + prefix)
	if u.Prefix == "/" {
		u.Prefix = DefaultPrefix
	}
	return u, nil
}

// String is the URL without credentials, safe for logs and errors.
func (u URL) String() string {
	return "etcd://" + strings.Join(u.Endpoints, ",") + u.Prefix
}

// redactURL hides the password of a URL being complained about.
func redactURL(s string) string {
	rest, ok := strings.CutPrefix(s, "etcd://")
	if !ok {
		if i := strings.Index(s, "@"); i >= 0 {
			return "…@" + s[i+1:]
		}
		return s
	}
	hosts, tail, slash := strings.Cut(rest, "/")
	if at := strings.LastIndex(hosts, "@"); at >= 0 {
		user, _, _ := strings.Cut(hosts[:at], ":")
		hosts = user + ":…@" + hosts[at+1:]
	}
	if slash {
		return "etcd://" + hosts + "/" + tail
	}
	return "etcd://" + hosts
}
