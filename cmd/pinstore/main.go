// Command pinstore runs the pinstore service and its operator tools.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pinstore/pinstore/internal/tracing"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "pinstore:", err)
		os.Exit(1)
	}
}

const usage = `usage: pinstore COMMAND [flags]

commands:
  serve [--addr ADDR] [--backups DIR]
                             run the HTTP API (--backups: report the backups' ages on /metrics)
  migrate [--per-host N] [--max-threads-running N] [--max-redo-log-percent N] [--max-replica-lag D] [--throttle-max-wait D]
                             create and upgrade every shard database the map names, waiting while a host is busy
  shards                     print the shard map and whether each host answers (exit 1 if any does not)
  repair [--dry-run] [--max-threads-running N] [--max-redo-log-percent N] [--max-replica-lag D] [--throttle-max-wait D]
                             find and fix pairs with one side missing, feeds, and the username index
                             (--dry-run: count what is broken, change nothing)
  move-shards --range A-B --to HOST [--finish | --revert | --abort]
              [--servers URL,URL… | --settle D] [--confirm-timeout D]
              [--keep D] [--keep-source] [--parallel N] [--batch N]
              [--max-threads-running N] [--max-redo-log-percent N] [--max-replica-lag D] [--throttle-max-wait D]
                             move a range of shards to another host of the map; the move stays
                             open (reversible) until --finish; --revert moves the range back
  topology push FILE [--revision N] [--init] | pull [--out FILE]
                             the shard map into and out of etcd (PINSTORE_TOPOLOGY)
  replica add --host HOST --dsn DSN [--semi-sync=true] [--rebuild] [--wait D]
                             make a MariaDB server a replica of a host's master, named in the map
  failover --host HOST [--to REPLICA] [--catch-up D] [--confirm-timeout D]
                             promote a replica of HOST to master; the old one is fenced
  changes [--after TOKEN | --snapshot] [--types pin,board] [--lists board_pins]
          [--nats URL --nats-stream NAME --nats-subjects PREFIX]
                             print every committed change after TOKEN as NDJSON (or publish to NATS JetStream);
                             --snapshot: what exists first, then every change after it
  backup --host HOST --to DIR | backup verify DIR [--scratch DIR]
                             back a host up (mariadb-backup), or prove a backup by restoring it (docs/backups.md)
  binlogs --host HOST --to DIR [--once]
                             copy a host's binary logs as they are written, for restores to a time
  restore --backup DIR --datadir NEW [--binlogs DIR] [--to-gtid G | --to-time T] [--shards LIST] [--load]
                             restore a backup into a new data directory, up to a GTID or a time
  id decode ID               print an ID's shard, type and local id as JSON
  id encode --shard S --type T --local L
                             print the ID with those parts (local id 1 … 2^36-1)
  token mint --user ID [--ttl 24h]
                             print a user token (signed with PINSTORE_TOKEN_SECRET)
  token hash [--name N] [--scopes read,write,admin] < secret
                             print the tokens-file line for a service token's secret

pinstore COMMAND -h prints a command's usage and flags.
configuration comes from PINSTORE_* environment variables (see docs/configuration.md)
`

// run is the whole program: main only adds the process's signals,
// arguments, environment and standard streams, so tests run it as is.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("no command")
	}
	err := runCommand(ctx, args[0], args[1:], getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // a command's -h: its usage is on stdout
	}
	return err
}

func runCommand(ctx context.Context, cmd string, rest []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	switch cmd {
	case "move-shards", "failover", "backup", "restore":
		// The control plane's long operations are traced when OTEL_* asks
		// for it: one span each, its progress lines as events.
		stop, terr := tracing.Setup(ctx, "pinstore", getenv)
		if terr != nil {
			return terr
		}
		name := "pinstore " + cmd
		if cmd == "backup" && len(rest) > 0 && rest[0] == "verify" {
			name += " verify"
		}
		var end func(error)
		ctx, stdout, end = tracing.Operation(ctx, name, stdout)
		defer func() {
			end(err)
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = stop(sctx)
		}()
	}
	switch cmd {
	case "serve":
		return runServe(ctx, rest, getenv, stdout, stderr)
	case "migrate":
		return runMigrate(ctx, rest, getenv, stdout, stderr)
	case "changes":
		return runChanges(ctx, rest, getenv, stdout, stderr)
	case "shards":
		return runShards(ctx, rest, getenv, stdout, stderr)
	case "repair":
		return runRepair(ctx, rest, getenv, stdout, stderr)
	case "move-shards":
		return runMoveShards(ctx, rest, getenv, stdout, stderr)
	case "topology":
		return runTopology(ctx, rest, getenv, stdout, stderr)
	case "replica":
		return runReplica(ctx, rest, getenv, stdout, stderr)
	case "failover":
		return runFailover(ctx, rest, getenv, stdout, stderr)
	case "backup", "binlogs", "restore":
		return runBackups(ctx, cmd, rest, getenv, stdout, stderr)
	case "id":
		return runID(rest, stdout, stderr)
	case "token":
		return runToken(rest, getenv, os.Stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}
