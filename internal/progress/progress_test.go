package progress

import (
	"testing"
	"time"
)

func TestFormats(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Count(0), "0"},
		{Count(999), "999"},
		{Count(1000), "1,000"},
		{Count(1234567), "1,234,567"},
		{Count(-12345), "-12,345"},
		{Bytes(512), "512 B"},
		{Bytes(3_140_000), "3.1 MB"},
		{Bytes(2_500_000_000), "2.5 GB"},
		{PerSecond(4100, time.Second, Count), "4,100/s"},
		{PerSecond(10, 0, Count), ""},
		{Left(0, 100, time.Second), "time left unknown"},
		{Left(50, 0, time.Second), "time left unknown"},
		{Left(25, 100, 10*time.Second), "about 30s left"},
		{Left(1, 3, 2*time.Second), "about 4s left"},
		{Left(120, 100, time.Second), "almost done"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
