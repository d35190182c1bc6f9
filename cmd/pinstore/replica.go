package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pinstore/pinstore/cluster/changes"
	"github.com/pinstore/pinstore/cluster/failover"
	"github.com/pinstore/pinstore/cluster/reshard"
)

// mapHome is where the operator commands read and change the shard map:
// etcd with PINSTORE_TOPOLOGY, else the map file PINSTORE_SHARD_MAP. It
// returns the home, the store configuration (shard count and prefix
// defaults) and a function that closes the etcd connection.
func mapHome(ctx context.Context, getenv func(string) string, what string) (failover.Home, func(), *etcdTopo, error) {
	cfg, err := storeConfig(getenv)
	if err != nil {
		return nil, nil, nil, err
	}
	topo, err := openTopology(ctx, getenv, &cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	switch {
	case topo != nil:
		return topo.c.Home(), topo.close, topo, nil
	case cfg.MapFile == "":
		return nil, nil, nil, fmt.Errorf("PINSTORE_SHARD_MAP must name the shard map file the servers read, or PINSTORE_TOPOLOGY the etcd topology they follow: %s changes the map", what)
	}
	return reshard.FileHome(cfg.MapFile), func() {}, nil, nil
}

// mapDefaults are the shard count and prefix a map without them assumes.
func mapDefaults(getenv func(string) string) (int, string, error) {
	cfg, err := storeConfig(func(k string) string {
		if k == "PINSTORE_TOPOLOGY" || k == "PINSTORE_SHARD_MAP" {
			return ""
		}
		return getenv(k)
	})
	if err != nil {
		return 0, "", err
	}
	return cfg.Map.Shards, cfg.Map.DBPrefix, nil
}

const replicaUsage = "usage: pinstore replica add --host HOST --dsn DSN [--semi-sync=true] [--rebuild] [--wait 5m]"

// runReplica is `pinstore replica add`: set a MariaDB server up as a
// replica of a host's master and name it in the map (package failover).
func runReplica(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if helpAsked(args) {
		fmt.Fprintln(stdout, replicaUsage)
		return nil
	}
	if len(args) == 0 || args[0] != "add" {
		return errors.New(replicaUsage)
	}
	fs := newFlags("replica add", "replica add --host HOST --dsn DSN [flags]\n\nmakes the MariaDB server at DSN a replica of HOST's master (a consistent copy, or by GTID\nwhen it already holds the master's history) and names it among HOST's replicas in the map", stderr)
	host := fs.String("host", "", "the host, as the shard map names it (required)")
	dsn := fs.String("dsn", "", "the new replica's DSN, as the servers will reach it (required)")
	semi := fs.Bool("semi-sync", true, "semi-synchronous replication: the master waits for a replica's acknowledgement before a commit returns")
	rebuild := fs.Bool("rebuild", false, "copy the master's shard databases even when the server holds transactions the master lacks (a former master's): they are thrown away")
	wait := fs.Duration("wait", 5*time.Minute, "how long the replica may take to catch up")
	if err := parseFlags(fs, args[1:], stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("replica add: unexpected arguments %q", fs.Args())
	}
	if *host == "" || *dsn == "" {
		fs.Usage()
		return errors.New("replica add: --host and --dsn are required")
	}
	access, err := mysqlAccess(getenv)
	if err != nil {
		return fmt.Errorf("replica add: %w", err)
	}
	shards, prefix, err := mapDefaults(getenv)
	if err != nil {
		return fmt.Errorf("replica add: %w", err)
	}
	home, closeHome, _, err := mapHome(ctx, getenv, "replica add")
	if err != nil {
		return fmt.Errorf("replica add: %w", err)
	}
	defer closeHome()
	rep, err := failover.AddReplica(ctx, failover.ReplicaOptions{
		Host: *host, DSN: *dsn, Home: home, Shards: shards, DBPrefix: prefix, Access: access,
		SemiSync: *semi, Rebuild: *rebuild, Wait: *wait, Progress: stdout,
	})
	if err != nil {
		return fmt.Errorf("replica add: %w", err)
	}
	how := "caught up by GTID from what it held"
	if rep.Copied {
		how = "copied the shard databases at " + orNone(rep.From)
	}
	mode := "asynchronous"
	if rep.SemiSync {
		mode = "semi-synchronous"
	}
	fmt.Fprintf(stdout, "replica add: %s replicates host %s (%s; %s); applied %s in %v\n", rep.Replica, *host, how, mode, orNone(rep.Applied), rep.Took.Round(time.Millisecond))
	if rep.Version != "" {
		fmt.Fprintf(stdout, "replica add: map version %s names it\n", rep.Version)
	}
	if db, err := sql.Open("mysql", *dsn); err == nil {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		if lacks, err := changes.Needs(c, db, true); err == nil && lacks != "" {
			fmt.Fprintf(stdout, "replica add: note: %s: %s\n", rep.Replica, lacks)
		}
		cancel()
		db.Close()
	}
	if *semi {
		fmt.Fprintln(stdout, "replica add: semi-synchronous replication was set with SET GLOBAL; put the master's rpl_semi_sync_master_enabled=ON and rpl_semi_sync_master_timeout, and every server's rpl_semi_sync_slave_enabled and rpl_semi_sync_master_wait_point=AFTER_SYNC, in their configuration so a restart keeps them (docs/operations/replicas-and-failover.md)")
	}
	return nil
}

// mysqlAccess reads PINSTORE_MYSQL_ADMIN and PINSTORE_REPLICATION_USER
// ("user:password"): who the replica and failover commands (and a server
// running automatic failover) connect to MariaDB as, and who replicas
// connect to their master as.
func mysqlAccess(getenv func(string) string) (failover.Access, error) {
	var a failover.Access
	var err error
	if a.Admin, err = failover.ParseCredentials(getenv("PINSTORE_MYSQL_ADMIN")); err != nil {
		return a, fmt.Errorf("PINSTORE_MYSQL_ADMIN: %w", err)
	}
	if a.Replication, err = failover.ParseCredentials(getenv("PINSTORE_REPLICATION_USER")); err != nil {
		return a, fmt.Errorf("PINSTORE_REPLICATION_USER: %w", err)
	}
	return a, nil
}

// runFailover is `pinstore failover --host HOST [--to REPLICA]`: promote a
// replica of HOST to master (package failover), holding the host's writes
// in the servers meanwhile.
func runFailover(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("failover", "failover --host HOST [--to REPLICA] [flags]\n\npromotes a replica of HOST to master: fences the old master when it answers, holds HOST's writes in the servers,\npromotes the replica once it has everything, points the other replicas at it and switches the map", stderr)
	host := fs.String("host", "", "the host, as the shard map names it (required)")
	to := fs.String("to", "", "the replica to promote (host:port or its DSN in the map); default the one that has received the most")
	catchUp := fs.Duration("catch-up", failover.DefaultCatchUp, "how long the replica may take to apply what it has (and, when the master answers, the master's last transaction)")
	confirmWait := fs.Duration("confirm-timeout", 10*time.Second, "with PINSTORE_TOPOLOGY: how long to wait for every server to report a new map")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("failover: unexpected arguments %q", fs.Args())
	}
	if *host == "" {
		fs.Usage()
		return errors.New("failover: --host is required")
	}
	access, err := mysqlAccess(getenv)
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	shards, prefix, err := mapDefaults(getenv)
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	poll, err := mapPoll(getenv)
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	home, closeHome, topo, err := mapHome(ctx, getenv, "failover")
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	defer closeHome()
	opt := failover.Options{Host: *host, To: *to, Home: home, Shards: shards, DBPrefix: prefix, Access: access, CatchUp: *catchUp, Progress: stdout}
	if topo != nil {
		opt.Lock, opt.Record = moveLock(etcdHome{topo.c.Home()}), failover.EtcdRecorder(topo.c)
		opt.Confirm = func(ctx context.Context, version string) error {
			_, err := topo.c.WaitDrained(ctx, version, *confirmWait)
			return err
		}
	} else {
		opt.Lock, opt.Record = moveLock(home.(reshard.Home)), failover.FileRecorder(getenv("PINSTORE_SHARD_MAP"))
		opt.Settle = poll + time.Second
	}
	rep, err := failover.Failover(ctx, opt)
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	printFailover(stdout, rep)
	return nil
}

// moveLock takes the lock of moves of home for a failover: no shard move
// and no other failover runs meanwhile, and none may be half-done.
func moveLock(home reshard.Home) func(ctx context.Context) (func(), error) {
	return func(ctx context.Context) (func(), error) {
		l, err := home.LockMoves(ctx)
		if err != nil {
			return nil, err
		}
		if len(l.State()) > 0 {
			l.Unlock()
			return nil, fmt.Errorf("a shard move is in progress (%s): finish it (run move-shards again) or abort it first", l)
		}
		return l.Unlock, nil
	}
}

// printFailover writes what a failover did.
func printFailover(w io.Writer, rep failover.Report) {
	fmt.Fprintf(w, "failover: host %s: %s → %s, promoted at %s; writes held %v, total %v; map version %s\n",
		rep.Host, rep.OldMaster, rep.NewMaster, orNone(rep.Promoted), rep.Held.Round(time.Millisecond), rep.Took.Round(time.Millisecond), rep.MapVersion)
	lost := "unknown"
	if rep.Lost >= 0 {
		lost = fmt.Sprint(rep.Lost)
	}
	fmt.Fprintf(w, "failover: transactions lost: %s (%s)\n", lost, rep.LostNote)
	if rep.SemiSync {
		fmt.Fprintln(w, "failover: replication was semi-synchronous: every acknowledged commit had reached a replica, and the promoted one had all any replica had: no acknowledged write is lost")
	}
	if len(rep.Repointed) > 0 {
		fmt.Fprintf(w, "failover: replicating from the new master: %s\n", strings.Join(rep.Repointed, ", "))
	}
	for _, f := range rep.Failed {
		fmt.Fprintf(w, "failover: NOT re-pointed: %s\n", f)
	}
	fmt.Fprintf(w, "failover: the old master %s is fenced (listed under fenced in the map%s); re-attach it with: pinstore replica add --host %s --dsn DSN\n",
		rep.OldMaster, map[bool]string{true: ", read_only", false: "; it did not answer: start it again read-only"}[rep.Answered], rep.Host)
}
