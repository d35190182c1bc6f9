package pinstore

import (
	"os"
	"testing"

	"github.com/pinstore/pinstore/internal/testenv"
)

// TestMain stops what testenv started (TestREADMECommands may fall back
// to MariaDB and Redis in Docker).
func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}
