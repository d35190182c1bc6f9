package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pinstore/pinstore/cluster/etcdtopo"
	"github.com/pinstore/pinstore/store/shardmap"

	"go.yaml.in/yaml/v3"
)

// composeFile is the part of docker-compose.yml this test reads.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   map[string]any    `yaml:"depends_on"`
	} `yaml:"services"`
}

// TestDockerCompose checks what can be checked without a Docker engine:
// the file parses, the API's environment is configuration pinstore really
// reads, the shard map it mounts is valid and splits every shard over the
// two MySQL services, and Redis is configured for the owner cache.
func TestDockerCompose(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	for _, name := range []string{"mysql-a", "mysql-a2", "mysql-b", "redis", "replica-init", "provision", "api"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("no service %q", name)
		}
	}
	// The stack runs the server the tests prove, with binary logs.
	for _, name := range []string{"mysql-a", "mysql-a2", "mysql-b"} {
		svc := c.Services[name]
		if svc.Image != "mariadb:10.11" || !slices.Contains(svc.Command, "--log-slave-updates") || !slices.Contains(svc.Command, "--gtid-strict-mode=ON") {
			t.Errorf("%s runs %s with %v: want mariadb:10.11 with a binary log of what it replicates", name, svc.Image, svc.Command)
		}
	}
	if got := strings.Join(c.Services["replica-init"].Command, " "); !strings.HasPrefix(got, "replica add --host mysql-a --dsn pinstore:pinstore@tcp(mysql-a2:3306)/") {
		t.Errorf("replica-init runs %q", got)
	}
	if _, ok := c.Services["provision"].DependsOn["replica-init"]; !ok {
		t.Error("provision does not wait for the replica: migrate would run before replication starts")
	}
	api := c.Services["api"]
	if _, ok := api.DependsOn["provision"]; !ok {
		t.Fatal("api does not wait for provisioning")
	}
	if got := strings.Join(c.Services["provision"].Command, " "); got != "migrate" {
		t.Fatalf("provision runs %q", got)
	}
	if !strings.Contains(strings.Join(c.Services["redis"].Command, " "), "--hash-max-listpack-entries 1024") {
		t.Fatal("redis is not configured for 1,000-entry owner hashes")
	}
	// Mounted files, as the container sees them → the repository's files.
	mounts := map[string]string{}
	for _, v := range api.Volumes {
		parts := strings.Split(v, ":")
		mounts[parts[1]] = filepath.Join("../..", parts[0])
	}
	read := map[string]bool{}
	getenv := func(k string) string {
		read[k] = true
		v := api.Environment[k]
		if p, ok := mounts[v]; ok {
			return p
		}
		return v
	}
	cfg, err := storeConfig(getenv)
	if err != nil {
		t.Fatalf("the api's configuration does not load: %v", err)
	}
	// Keys the store does not read must be read by serve or auth code.
	var src strings.Builder
	for _, pat := range []string{"*.go", "../../auth/*.go", "../../api/*.go"} {
		files, _ := filepath.Glob(pat)
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				b, _ := os.ReadFile(f)
				src.Write(b)
			}
		}
	}
	for k := range api.Environment {
		if !read[k] && !strings.Contains(src.String(), `"`+k+`"`) {
			t.Errorf("docker-compose sets %s, which pinstore never reads", k)
		}
	}
	m := cfg.Map
	if m.Shards != 4096 || m.DBName(4095) != "db04095" {
		t.Fatalf("compose map: %d shards, last %s", m.Shards, m.DBName(m.Shards-1))
	}
	hosts := map[string]int{}
	for s := 0; s < m.Shards; s++ {
		r, ok := m.RangeOf(s)
		if !ok {
			t.Fatalf("shard %d in no range", s)
		}
		hosts[r.Host]++
	}
	if hosts["mysql-a"] != 2048 || hosts["mysql-b"] != 2048 {
		t.Fatalf("shards per host: %v", hosts)
	}
	// The etcd profile: etcd, a one-shot push of the same map, and an API
	// that follows etcd with the rest of the api's configuration.
	for _, name := range []string{"etcd", "topology-init", "api-etcd"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("no service %q", name)
		}
	}
	ti := c.Services["topology-init"]
	if got := strings.Join(ti.Command, " "); got != "topology push /etc/pinstore/shardmap.yaml --init" || !slices.Contains(ti.Volumes, "./deploy/shardmap.compose.yaml:/etc/pinstore/shardmap.yaml:ro") {
		t.Fatalf("topology-init runs %q with %v", got, ti.Volumes)
	}
	ae := c.Services["api-etcd"]
	for _, svc := range []string{"topology-init", "provision"} {
		if _, ok := ae.DependsOn[svc]; !ok {
			t.Fatalf("api-etcd does not wait for %s", svc)
		}
	}
	for k, v := range ae.Environment {
		if k == "PINSTORE_TOPOLOGY" {
			u, err := etcdtopo.ParseURL(v)
			if err != nil || ti.Environment[k] != v || u.Endpoints[0] != "etcd:2379" {
				t.Fatalf("api-etcd follows %q (%v), topology-init pushes to %q", v, err, ti.Environment[k])
			}
			continue
		}
		if api.Environment[k] != v {
			t.Errorf("api-etcd sets %s=%q, the api %q", k, v, api.Environment[k])
		}
	}
	for name, h := range m.Hosts {
		for _, dsn := range append([]string{h.Master}, h.ReplicaDSNs()...) {
			host := strings.TrimSuffix(strings.TrimPrefix(shardmap.HostAddr(dsn), "tcp("), ":3306)")
			if _, ok := c.Services[host]; !ok {
				t.Errorf("map host %s points at %s, which is not a compose service", name, host)
			}
		}
	}
	if rs := m.Hosts["mysql-a"].ReplicaDSNs(); len(rs) != 1 || shardmap.HostAddr(rs[0]) != "tcp(mysql-a2:3306)" {
		t.Errorf("mysql-a's replicas in the compose map: %v", rs)
	}
}
