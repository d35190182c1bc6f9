// Command ddl prints, as one SQL script for the mariadb client, what
// `pinstore migrate` runs on a range of fresh shard databases: for each,
// the statements of migrations.Apply (the database, schema_migrations,
// every embedded migration, the version rows), in the same order. run.sh
// feeds four such scripts to four mariadb clients to time the same DDL
// without pinstore.
//
//	go run ./bench/migrate -prefix bm_ -from 0 -to 1024
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/pinstore/pinstore/migrations"
)

func main() {
	prefix := flag.String("prefix", "", "database name prefix (shard N is prefix + %05d); required")
	from := flag.Int("from", 0, "first shard")
	to := flag.Int("to", 0, "last shard + 1")
	flag.Parse()
	if *prefix == "" || *to <= *from {
		fmt.Fprintln(os.Stderr, "usage: ddl -prefix P -from A -to B")
		os.Exit(2)
	}
	ms, err := migrations.All()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ddl:", err)
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for shard := *from; shard < *to; shard++ {
		name := fmt.Sprintf("%s%05d", *prefix, shard)
		fmt.Fprintf(w, "CREATE DATABASE IF NOT EXISTS %s CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;\nUSE %s;\n", name, name)
		fmt.Fprintln(w, "CREATE TABLE IF NOT EXISTS schema_migrations (version INT NOT NULL PRIMARY KEY, name VARCHAR(100) NOT NULL, applied_at DATETIME(6) NOT NULL) ENGINE=InnoDB;")
		for _, m := range ms {
			for _, q := range m.Statements {
				fmt.Fprintf(w, "%s;\n", strings.TrimSpace(q))
			}
			fmt.Fprintf(w, "INSERT IGNORE INTO schema_migrations (version, name, applied_at) VALUES (%d, '%s', UTC_TIMESTAMP(6));\n", m.Version, m.Name)
		}
	}
}
