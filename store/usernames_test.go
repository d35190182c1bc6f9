package store

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
)

func usernameOf(t *testing.T, o model.Object) string {
	t.Helper()
	d, err := model.DecodeDoc(idcodec.TypeUser, o.Doc)
	if err != nil {
		t.Fatal(err)
	}
	return d.(*model.UserDoc).Username
}

func TestUsernamesAreUniqueInAnyCase(t *testing.T) {
	s, _ := openTest(t)
	ann, err := s.CreateUser(ctx, model.UserDoc{Username: "Ann"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Ann", "ann", "ANN"} {
		if _, err := s.CreateUser(ctx, model.UserDoc{Username: name}); !model.IsCode(err, model.EUsernameTaken) {
			t.Fatalf("create %q: %v, want username_taken", name, err)
		}
	}
	// Found in one read of the index, in any case; the stored spelling kept.
	for _, name := range []string{"ann", "ANN", "Ann"} {
		o, err := s.GetUserByUsername(ctx, name)
		if err != nil || o.ID != ann.ID || usernameOf(t, o) != "Ann" {
			t.Fatalf("by %q: %v %v", name, o.ID, err)
		}
	}
	if _, err := s.GetUserByUsername(ctx, "nobody"); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("unknown name: %v", err)
	}
	if _, err := s.GetUserByUsername(ctx, "no spaces"); !model.IsCode(err, model.EInvalid) {
		t.Fatalf("a name that cannot be a username: %v", err)
	}

	// A rename frees the old name; renaming to a taken name changes nothing.
	bob, err := s.CreateUser(ctx, model.UserDoc{Username: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	rename := func(id uint64, name string) error {
		_, err := s.Update(ctx, id, idcodec.TypeUser, 0, func([]byte) ([]byte, error) {
			return []byte(`{"username":"` + name + `","active":true}`), nil
		})
		return err
	}
	if err := rename(bob.ID, "ANN"); !model.IsCode(err, model.EUsernameTaken) {
		t.Fatalf("rename to a taken name: %v", err)
	}
	if o, _ := s.Get(ctx, bob.ID, idcodec.TypeUser); usernameOf(t, o) != "bob" || o.Version != 1 {
		t.Fatalf("bob after a refused rename: %s v%d", o.Doc, o.Version)
	}
	if err := rename(ann.ID, "anne"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetUserByUsername(ctx, "ann"); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("the old name still finds: %v", err)
	}
	if o, err := s.GetUserByUsername(ctx, "Anne"); err != nil || o.ID != ann.ID {
		t.Fatalf("the new name: %v %v", o.ID, err)
	}
	if err := rename(bob.ID, "Ann"); err != nil {
		t.Fatalf("the freed name: %v", err)
	}
	// Changing only the case keeps the claim.
	if err := rename(bob.ID, "aNN"); err != nil {
		t.Fatal(err)
	}
	if o, err := s.GetUserByUsername(ctx, "ann"); err != nil || usernameOf(t, o) != "aNN" {
		t.Fatalf("after a change of case: %v", err)
	}
	// A delete frees the name.
	if err := s.Delete(ctx, bob.ID, idcodec.TypeUser, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateUser(ctx, model.UserDoc{Username: "ann"}); err != nil {
		t.Fatalf("the deleted user's name: %v", err)
	}
	if n := rowsOf(t, s, "usernames"); n != 2 { // anne, ann
		t.Fatalf("%d index rows, want 2", n)
	}
}

// Of 32 concurrent creates of one name exactly one succeeds, and the
// losers leave nothing behind.
func TestConcurrentCreatesOfOneName(t *testing.T) {
	s, _ := openTest(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, taken := 0, 0
	for i := range 32 {
		wg.Go(func() {
			_, err := s.CreateUser(ctx, model.UserDoc{Username: []string{"Zoe", "zoe", "ZOE", "zOe"}[i%4]})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case model.IsCode(err, model.EUsernameTaken):
				taken++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if won != 1 || taken != 31 {
		t.Fatalf("%d created, %d refused; want 1 and 31", won, taken)
	}
	if c := rowsOf(t, s, "user_claims"); c != 0 {
		t.Fatalf("%d pending users left", c)
	}
	users := rowsOf(t, s, "users")
	if users != 1 {
		t.Fatalf("%d user rows, want 1: the losers were never visible and leave nothing", users)
	}
}

// pendingUser inserts a user as a create that died after its first step
// leaves it: inactive, with its pending row, created at.
func pendingUser(t *testing.T, s *Store, name string, at time.Time) uint64 {
	t.Helper()
	sh := s.router.Current().RandomOpen()
	var id uint64
	err := s.inTx(ctx, "test", sh, func(tx *shardsql.Tx) error {
		o, err := shardsql.InsertObject(ctx, tx, sh.DB, idcodec.TypeUser, []byte(`{"username":"`+name+`","active":false}`), 0, at)
		if err != nil {
			return err
		}
		id = o.ID
		return shardsql.InsertUserClaim(ctx, tx, sh.DB, id, usernameKey(name), at)
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A server killed between the steps of a create never leaves a name
// blocked for good nor a visible user without its name: the sweep
// finishes a user whose claim holds (or can still be made) and drops one
// whose name another user took.
func TestCreateLeftHalfWayIsFinishedOrDropped(t *testing.T) {
	s, _ := openTest(t)
	old := time.Now().UTC().Add(-time.Minute)
	// 1. Died before claiming: the sweep claims and finishes it.
	lone := pendingUser(t, s, "lone", old)
	if _, err := s.Get(ctx, lone, idcodec.TypeUser); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("a pending user is visible: %v", err)
	}
	if _, err := s.GetUserByUsername(ctx, "lone"); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("a pending user is found by name: %v", err)
	}
	// 2. Died after claiming: the sweep makes it visible.
	claimed := pendingUser(t, s, "claimed", old)
	if err := s.claimUsername(ctx, "test", "claimed", claimed); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateUser(ctx, model.UserDoc{Username: "Claimed"}); !model.IsCode(err, model.EUsernameTaken) {
		t.Fatalf("a name claimed by a user still being created: %v", err)
	}
	// 3. Its name went to someone else: the sweep drops it.
	taker, err := s.CreateUser(ctx, model.UserDoc{Username: "taken"})
	if err != nil {
		t.Fatal(err)
	}
	loser := pendingUser(t, s, "taken", old)

	if n, err := s.HealPairs(ctx, 0); err != nil || n < 3 {
		t.Fatalf("sweep: %d settled, %v", n, err)
	}
	if o, err := s.Get(ctx, claimed, idcodec.TypeUser); err != nil || o.Version != 1 {
		t.Fatalf("the claimed user was not finished: %v", err)
	}
	if o, err := s.GetUserByUsername(ctx, "CLAIMED"); err != nil || o.ID != claimed {
		t.Fatalf("by name: %v", err)
	}
	if _, err := s.Get(ctx, loser, idcodec.TypeUser); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("the user whose name was taken is visible: %v", err)
	}
	if o, err := s.GetUserByUsername(ctx, "taken"); err != nil || o.ID != taker.ID {
		t.Fatalf("the name's holder changed: %v", err)
	}
	if o, err := s.GetUserByUsername(ctx, "Lone"); err != nil || o.ID != lone {
		t.Fatalf("the user that died before claiming was not finished: %v", err)
	}
	rep, err := s.RepairUsernames(ctx, true)
	if err != nil || rep.Finished+rep.Claimed+rep.Stale != 0 || len(rep.Collisions) != 0 {
		t.Fatalf("repair after the sweep finds %+v, %v", rep, err)
	}
}

// Rows a dead rename or delete left do not block the name: the next claim
// takes them over, and repair removes them.
func TestStaleUsernameRowsDoNotBlock(t *testing.T) {
	s, _ := openTest(t)
	u := mustUser(t, s, "first")
	// A rename that claimed "second" and died before its user row changed.
	if err := s.claimUsername(ctx, "test", "second", u); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetUserByUsername(ctx, "second"); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("a row the user does not match finds it: %v", err)
	}
	rep, err := s.RepairUsernames(ctx, true)
	if err != nil || rep.Stale != 1 {
		t.Fatalf("dry run: %+v %v", rep, err)
	}
	v, err := s.CreateUser(ctx, model.UserDoc{Username: "Second"})
	if err != nil {
		t.Fatalf("a stale row blocked the name: %v", err)
	}
	if o, err := s.GetUserByUsername(ctx, "second"); err != nil || o.ID != v.ID {
		t.Fatalf("the new holder: %v", err)
	}
	if rep, err := s.RepairUsernames(ctx, false); err != nil || rep.Stale != 0 || rep.Users != 2 {
		t.Fatalf("repair: %+v %v", rep, err)
	}
}

// Users created before the index existed: repair claims their names and
// reports the names several of them carry instead of dropping one.
func TestRepairBuildsTheIndexOfOlderUsers(t *testing.T) {
	s, _ := openTest(t)
	top := s.router.Current()
	var ids []uint64
	for i, name := range []string{"old1", "Old2", "old2", "OLD2", "old3"} {
		sh, _ := top.Shard(i % top.Len())
		o, err := shardsql.InsertObject(ctx, sh.Host.DB, sh.DB, idcodec.TypeUser, []byte(`{"username":"`+name+`","active":true}`), model.FlagActive, shardsql.Now())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.ID)
	}
	if _, err := s.GetUserByUsername(ctx, "old1"); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("before repair: %v", err)
	}
	rep, err := s.RepairUsernames(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Users != 5 || rep.Claimed != 3 || len(rep.Collisions) != 1 || rep.Collisions[0].Holder != fmt.Sprint(ids[1]) || len(rep.Collisions[0].Others) != 2 {
		t.Fatalf("report %+v", rep)
	}
	for name, want := range map[string]uint64{"OLD1": ids[0], "old2": ids[1], "old3": ids[4]} {
		if o, err := s.GetUserByUsername(ctx, name); err != nil || o.ID != want {
			t.Fatalf("%s: %v %v", name, o.ID, err)
		}
	}
	if _, err := s.CreateUser(ctx, model.UserDoc{Username: "old3"}); !model.IsCode(err, model.EUsernameTaken) {
		t.Fatalf("an older user's name is not taken: %v", err)
	}
	if rep, _ := s.RepairUsernames(ctx, false); rep.Claimed != 0 || len(rep.Collisions) != 1 {
		t.Fatalf("second repair %+v", rep)
	}
}
