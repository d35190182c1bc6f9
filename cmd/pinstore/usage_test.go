package main

import (
	"bytes"
	"context"
	"regexp"
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
		{[]string{"-h"}, []string{"usage: pinstore COMMAND", "move-shards", "replica add", "failover", "backup --host", "binlogs --host", "restore --backup"}},
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

// TestUsageListsEveryFlag: the top-level usage names every flag of every
// command (as its -h lists them) in that command's entry, and every
// command of runCommand has an entry.
func TestUsageListsEveryFlag(t *testing.T) {
	commands := [][]string{
		{"serve"}, {"migrate"}, {"shards"}, {"repair"}, {"move-shards"},
		{"topology", "push"}, {"topology", "pull"}, {"replica", "add"}, {"failover"},
		{"id", "decode"}, {"id", "encode"}, {"token", "mint"}, {"token", "hash"},
		{"changes"}, {"backup"}, {"backup", "verify"}, {"binlogs"}, {"restore"},
	}
	// An entry is its first line ("  CMD …") and the lines indented deeper
	// that follow it.
	entry := func(cmd []string) string {
		lines := strings.Split(usage, "\n")
		for i, l := range lines {
			if !strings.HasPrefix(l, "  "+cmd[0]+" ") && l != "  "+cmd[0] {
				continue
			}
			if len(cmd) > 1 && !strings.Contains(l, cmd[1]) {
				continue
			}
			out := l
			for _, next := range lines[i+1:] {
				if !strings.HasPrefix(next, "   ") {
					break
				}
				out += "\n" + next
			}
			return out
		}
		return ""
	}
	flagRe := regexp.MustCompile(`(?m)^  -([a-z-]+)`)
	env := map[string]string{"PINSTORE_MYSQL_DSN": "root@tcp(127.0.0.1:1)/"}
	for _, cmd := range commands {
		e := entry(cmd)
		if e == "" {
			t.Errorf("the usage has no entry for %q", strings.Join(cmd, " "))
			continue
		}
		var out, errOut bytes.Buffer
		if err := run(context.Background(), append(append([]string{}, cmd...), "-h"), func(k string) string { return env[k] }, &out, &errOut); err != nil {
			t.Fatalf("%v -h: %v", cmd, err)
		}
		for _, m := range flagRe.FindAllStringSubmatch(out.String(), -1) {
			if !strings.Contains(e, "--"+m[1]) {
				t.Errorf("the usage's entry for %q lacks --%s:\n%s", strings.Join(cmd, " "), m[1], e)
			}
		}
	}
}

// TestIDEncodeNeedsLocal: id encode refuses a missing or out-of-range
// local id (and any missing part) with an error naming it, instead of
// printing an ID no object can have.
func TestIDEncodeNeedsLocal(t *testing.T) {
	for _, args := range [][]string{
		{"--shard", "1", "--type", "pin"},
		{"--shard", "1", "--type", "pin", "--local", "0"},
		{"--shard", "1", "--type", "pin", "--local", "68719476736"},
		{"--type", "pin", "--local", "5"},
	} {
		out, err := runCmd(t, nil, append([]string{"id", "encode"}, args...)...)
		if err == nil || out != "" || !strings.Contains(err.Error(), "--") {
			t.Errorf("id encode %v: %q, %v; want an error naming the flag and nothing printed", args, out, err)
		}
	}
	if _, err := runCmd(t, nil, "id", "encode", "--shard", "1", "--type", "pin"); err == nil || !strings.Contains(err.Error(), "--local") {
		t.Errorf("without --local: %v", err)
	}
	if _, err := runCmd(t, nil, "id", "encode", "--shard", "1", "--type", "pin", "--local", "0"); err == nil || !strings.Contains(err.Error(), "1 … ") {
		t.Errorf("--local 0: %v", err)
	}
}

// TestRepairHelpSaysWhatDryRunCounts: repair -h says --dry-run counts
// feeds and usernames too, not only pairs, and changes nothing.
func TestRepairHelpSaysWhatDryRunCounts(t *testing.T) {
	out, err := runCmd(t, nil, "repair", "-h")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"pairs", "feeds", "usernames", "change nothing"} {
		if !strings.Contains(out, w) {
			t.Errorf("repair -h lacks %q:\n%s", w, out)
		}
	}
}
