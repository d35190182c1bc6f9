package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestSubcommandHelp: `pinstore CMD -h` prints CMD's usage on stdout and
// succeeds, without touching a database (the environment names none that
// answers), for every command and sub-command.
func TestSubcommandHelp(t *testing.T) {
	env := map[string]string{"PINSTORE_MYSQL_DSN": "root@tcp(127.0.0.1:1)/"}
	tests := []struct {
		args []string
		want []string // in the usage
	}{
		{[]string{"serve", "-h"}, []string{"usage: pinstore serve", "-addr", "-backups"}},
		{[]string{"migrate", "-h"}, []string{"usage: pinstore migrate", "-per-host"}},
		{[]string{"shards", "-h"}, []string{"usage: pinstore shards"}},
		{[]string{"repair", "-h"}, []string{"usage: pinstore repair", "-dry-run"}},
		{[]string{"repair", "--help"}, []string{"usage: pinstore repair", "-dry-run"}},
		{[]string{"move-shards", "-h"}, []string{"usage: pinstore move-shards", "-range", "-to", "-abort"}},
		{[]string{"id", "-h"}, []string{"usage: pinstore id decode ID", "id encode"}},
		{[]string{"id", "decode", "-h"}, []string{"usage: pinstore id decode ID"}},
		{[]string{"id", "encode", "-h"}, []string{"usage: pinstore id encode", "-shard", "-type", "-local"}},
		{[]string{"token", "-h"}, []string{"usage: pinstore token mint", "token hash"}},
		{[]string{"token", "mint", "-h"}, []string{"usage: pinstore token mint", "-user", "-ttl"}},
		{[]string{"token", "hash", "-help"}, []string{"usage: pinstore token hash", "-name", "-scopes"}},
		{[]string{"replica", "-h"}, []string{"usage: pinstore replica add"}},
		{[]string{"replica", "add", "-h"}, []string{"usage: pinstore replica add", "-host", "-dsn", "-semi-sync", "-rebuild"}},
		{[]string{"failover", "-h"}, []string{"usage: pinstore failover", "-host", "-to", "-catch-up"}},
		{[]string{"backup", "-h"}, []string{"usage: pinstore backup --host HOST --to DIR", "backup verify DIR"}},
		{[]string{"backup", "--host", "a", "-h"}, []string{"usage: pinstore backup --host HOST --to DIR", "-catch-up"}},
		{[]string{"backup", "verify", "-h"}, []string{"usage: pinstore backup verify DIR", "-scratch"}},
		{[]string{"binlogs", "-h"}, []string{"usage: pinstore binlogs", "-host", "-to", "-once"}},
		{[]string{"restore", "-h"}, []string{"usage: pinstore restore", "-backup", "-datadir", "-binlogs", "-to-gtid", "-to-time", "-shards", "-load"}},
		{[]string{"-h"}, []string{"usage: pinstore COMMAND", "move-shards", "replica add", "failover", "backup|binlogs|restore"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tt.args, func(k string) string { return env[k] }, &out, &errOut)
			if err != nil {
				t.Fatalf("err = %v (stderr %q); want success", err, errOut.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			if errOut.Len() != 0 {
				t.Errorf("stderr = %q, want nothing", errOut.String())
			}
		})
	}
	// A wrong flag is still an error, with the usage on stderr.
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"repair", "--nope"}, func(string) string { return "" }, &out, &errOut); err == nil {
		t.Fatal("repair --nope succeeded")
	}
	if !strings.Contains(errOut.String(), "usage: pinstore repair") || out.Len() != 0 {
		t.Fatalf("repair --nope: stdout %q stderr %q", out.String(), errOut.String())
	}
}
