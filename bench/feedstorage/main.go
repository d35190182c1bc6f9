// Command feedstorage computes the home feed's storage per pin with and
// without a pull threshold, for follower counts drawn from a Zipf law:
// user of rank r has about C / r^s followers, C set so that the average
// user follows -follows users, and every user pins equally often.
//
//	go run ./bench/feedstorage -users 1000000 -follows 200 -s 1
package main

import (
	"flag"
	"fmt"
	"math"
)

func main() {
	users := flag.Int("users", 1_000_000, "users")
	follows := flag.Float64("follows", 200, "average users each user follows")
	s := flag.Float64("s", 1, "Zipf exponent")
	flag.Parse()
	h := 0.0
	for r := 1; r <= *users; r++ {
		h += math.Pow(float64(r), -*s)
	}
	c := *follows * float64(*users) / h
	counts := make([]int64, *users)
	var total int64
	for r := range counts {
		counts[r] = int64(math.Round(c * math.Pow(float64(r+1), -*s)))
		total += counts[r]
	}
	fmt.Printf("%d users, %d follows (%.0f per user), most followed %d\n\n", *users, total, float64(total)/float64(*users), counts[0])
	fmt.Println("| threshold | authors pulled | follows to pulled authors | user_feed rows per pin (all authors pin equally) | vs no threshold | feed_pulled rows (once) | largest fan-out of one pin |")
	fmt.Println("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, t := range []int64{0, 100_000, 10_000, 1_000} {
		var pulled, pulledFollows, pushedFollows, largest int64
		for _, n := range counts {
			if t > 0 && n >= t {
				pulled++
				pulledFollows += n
				continue
			}
			pushedFollows += n
			largest = max(largest, n)
		}
		name := fmt.Sprint(t)
		if t == 0 {
			name = "none"
		}
		perPin := float64(pushedFollows) / float64(*users)
		fmt.Printf("| %s | %d | %.1f %% | %.1f | %.2f | %d | %d |\n", name, pulled, 100*float64(pulledFollows)/float64(total), perPin, perPin/(float64(total)/float64(*users)), pulledFollows, largest)
	}
}
