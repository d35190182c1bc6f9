package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
)

// newFlags is the flag set of `pinstore SYNOPSIS`: its usage (printed for
// -h, and after a flag error) is the synopsis line followed by the flags.
// Errors go to stderr; parseFlags sends a -h's usage to stdout.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: pinstore %s\n", synopsis)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(fs.Output(), "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args with fs. For -h (or -help, --help) it prints the
// usage on stdout and returns flag.ErrHelp, which run turns into success;
// any other flag error is printed, with the usage, on fs's output.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	errOut := fs.Output()
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(errOut)
	if errors.Is(err, flag.ErrHelp) {
		_, _ = stdout.Write(buf.Bytes())
		return flag.ErrHelp
	}
	_, _ = errOut.Write(buf.Bytes())
	return err
}

// helpAsked reports whether args ask for help before anything else
// (commands that take a sub-command first: id, token).
func helpAsked(args []string) bool {
	return len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help")
}
