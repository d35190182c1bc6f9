package filewatch

import (
	"os"
	"path/filepath"
	"testing"
)

func TestChanged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	write := func(s string) {
		t.Helper()
		tmp := filepath.Join(dir, "tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(f *File, wantData string, wantChanged, wantErr bool) {
		t.Helper()
		data, changed, err := f.Changed()
		if changed != wantChanged || (err != nil) != wantErr || string(data) != wantData {
			t.Fatalf("Changed() = %q, %v, %v; want %q, %v, error %v", data, changed, err, wantData, wantChanged, wantErr)
		}
	}
	f := New(path)
	expect(f, "", false, true)  // missing: the error once
	expect(f, "", false, false) // then quiet while it lasts
	write("one")
	expect(f, "one", true, false)
	expect(f, "", false, false) // unchanged (re-read within the racy window, same hash)
	write("two")                // same size, replaced
	expect(f, "two", true, false)
	write("two") // new inode, same content: nothing new
	expect(f, "", false, false)
	f.Forget()
	expect(f, "two", true, false)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	expect(f, "", false, true)
	write("three")
	expect(f, "three", true, false)
}
