package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/pinstore/pinstore/api"
)

// unknownSibling returns a pin ID on the same shard as pin that no object
// has (a local id far beyond any assigned).
func unknownSibling(t *testing.T, pin string) string {
	t.Helper()
	id, err := strconv.ParseUint(pin, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatUint(id&^(1<<36-1)|(1<<36-2), 10)
}

// snapshot is what a refused request must leave unchanged.
type snapshot struct {
	boardPins, userPins, boards, likes, likers, followers, comments int64
	pinVersion, boardVersion, userVersion                           int64
	boardPinIDs                                                     string
}

func (f fixture) snapshot(s *server) snapshot {
	s.t.Helper()
	ids, _ := s.all("/v1/boards/"+f.board.ID+"/pins", 250)
	return snapshot{
		boardPins:    s.count("/v1/boards/" + f.board.ID + "/pins"),
		userPins:     s.count("/v1/users/" + f.alice.ID + "/pins"),
		boards:       s.count("/v1/users/" + f.alice.ID + "/boards"),
		likes:        s.count("/v1/users/" + f.bob.ID + "/likes"),
		likers:       s.count("/v1/pins/" + f.pins[0] + "/likers"),
		followers:    s.count("/v1/users/" + f.alice.ID + "/followers"),
		comments:     s.count("/v1/pins/" + f.pins[0] + "/comments"),
		pinVersion:   s.get("/v1/pins/" + f.pins[0]).Version,
		boardVersion: s.get("/v1/boards/" + f.board.ID).Version,
		userVersion:  s.get("/v1/users/" + f.alice.ID).Version,
		boardPinIDs:  strings.Join(ids, ","),
	}
}

func TestServeErrorsWriteNothing(t *testing.T) {
	s := startServer(t)
	f := newFixture(t, s, 3)
	alice, bob, board, pin := f.alice.ID, f.bob.ID, f.board.ID, f.pins[0]
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+bob+"/likes/"+pin, nil)
	// Two followers of alice and a second board, so that real cursors of
	// one list can be tried on another.
	carol := s.create("/v1/users", map[string]any{"username": "carol"}).ID
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+bob+"/following/"+alice, nil)
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+carol+"/following/"+alice, nil)
	board2 := s.create("/v1/boards", map[string]any{"owner_id": alice, "name": "Other"}).ID
	boardCursor := *s.page("/v1/boards/" + board + "/pins?limit=1").NextCursor
	followersCursor := *s.page("/v1/users/" + alice + "/followers?limit=1").NextCursor
	// A secret board of alice with a pin, and bob's own board and token:
	// to bob the secret ones are as absent as missing ones.
	secretBoard := s.create("/v1/boards", map[string]any{"owner_id": alice, "name": "Secret", "secret": true}).ID
	secretPin := s.create("/v1/pins", map[string]any{"board_id": secretBoard}).ID
	bobBoard := s.create("/v1/boards", map[string]any{"owner_id": bob, "name": "Bob's"}).ID
	asBob := bearerHdr(mintUserToken(t, bob, "1h"))
	// alice's comment on her secret pin; and a board of hers made secret
	// after bob commented on its pin and liked it.
	secretComment := s.create("/v1/pins/"+secretPin+"/comments", map[string]any{"author_id": alice, "text": "mine"}).ID
	flipBoard := s.create("/v1/boards", map[string]any{"owner_id": alice, "name": "Later secret"}).ID
	flipPin := s.create("/v1/pins", map[string]any{"board_id": flipBoard}).ID
	flipPin2 := s.create("/v1/pins", map[string]any{"board_id": flipBoard}).ID
	bobComment := s.create("/v1/pins/"+flipPin+"/comments", map[string]any{"author_id": bob, "text": "bob's"}).ID
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+bob+"/likes/"+flipPin, nil)
	s.must(http.StatusOK, http.MethodPatch, "/v1/boards/"+flipBoard, map[string]any{"secret": true})
	// An idempotency key used by a pin create: any other request with it,
	// on any POST route and shard, is refused.
	s.must(http.StatusCreated, http.MethodPost, "/v1/pins", map[string]any{"board_id": board}, "Idempotency-Key", "used-key")
	usedKey := []string{"Idempotency-Key", "used-key"}
	before := f.snapshot(s)
	beforeDB := s.settledDB() // the setup's cache marks and fan-out done: only the requests below may change it

	big := strings.Repeat("x", 70<<10)
	bigData := map[string]any{"board_id": board, "data": map[string]string{"blob": strings.Repeat("y", 9<<10)}}
	// Nesting: 10000 levels (far beyond any limit), and 40 levels (small,
	// within the data limit, but deeper than MariaDB's JSON_VALID accepts).
	deepArrays := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObjects := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	pinBody := func(rest string) string { return `{"board_id":"` + board + `",` + rest + `}` }
	reservedPin := func(bit uint) string {
		id, _ := strconv.ParseUint(pin, 10, 64)
		return strconv.FormatUint(id|1<<bit, 10)
	}
	idMaxUint64 := "18446744073709551615"
	idHuge := strings.Repeat("9", 1000)
	position := "/v1/boards/" + board + "/pins/" + pin + "/position"
	cases := []hostileCase{
		// Malformed ids: 400. Well-formed ids of the wrong type: 404.
		{"id not decimal", 400, "invalid_argument", "GET", "/v1/pins/" + idNotDecimal, nil, nil, "not a decimal"},
		{"id overflows", 400, "invalid_argument", "GET", "/v1/pins/" + idOverflow, nil, nil, "not a decimal"},
		{"id with reserved bits", 400, "invalid_argument", "GET", "/v1/pins/" + idReserved, nil, nil, "reserved"},
		{"id of unknown type", 400, "invalid_argument", "GET", "/v1/pins/" + idBadType, nil, nil, "unknown type"},
		{"id on an unconfigured shard", 400, "invalid_argument", "GET", "/v1/pins/" + vecPin, nil, nil, ""},
		{"list of an unconfigured shard", 400, "invalid_argument", "GET", "/v1/boards/" + vecBoard + "/pins", nil, nil, ""},
		{"like a pin on an unconfigured shard", 400, "invalid_argument", "PUT", "/v1/users/" + bob + "/likes/" + vecPin, nil, nil, ""},
		{"multi-get on an unconfigured shard", 400, "invalid_argument", "GET", "/v1/pins?ids=" + pin + "," + vecPin, nil, nil, ""},
		{"owners on an unconfigured shard", 400, "invalid_argument", "POST", "/v1/pins/owners", map[string]any{"ids": []string{pin, vecPin}}, nil, ""},
		{"pin on a board of an unconfigured shard", 400, "invalid_argument", "POST", "/v1/pins", map[string]any{"board_id": vecBoard}, nil, ""},
		{"id with a sign", 400, "invalid_argument", "GET", "/v1/users/+" + alice, nil, nil, ""},
		{"id with leading zero", 400, "invalid_argument", "GET", "/v1/users/0" + alice, nil, nil, ""},
		{"like a malformed pin", 400, "invalid_argument", "PUT", "/v1/users/" + bob + "/likes/" + idNotDecimal, nil, nil, "pin_id"},
		{"follow a malformed user", 400, "invalid_argument", "PUT", "/v1/users/" + bob + "/following/" + idReserved, nil, nil, "target_id"},
		{"follow oneself", 400, "invalid_argument", "PUT", "/v1/users/" + bob + "/following/" + bob, nil, nil, ""},
		{"board id as pin", 404, "not_found", "GET", "/v1/pins/" + board, nil, nil, ""},
		{"pin id as user", 404, "not_found", "GET", "/v1/users/" + pin, nil, nil, ""},
		{"delete a board id as pin", 404, "not_found", "DELETE", "/v1/pins/" + board, nil, nil, ""},
		{"patch a user id as board", 404, "not_found", "PATCH", "/v1/boards/" + alice, `{"name":"x"}`, nil, ""},
		{"like a board", 404, "not_found", "PUT", "/v1/users/" + bob + "/likes/" + board, nil, nil, ""},
		{"unlike a board", 404, "not_found", "DELETE", "/v1/users/" + bob + "/likes/" + board, nil, nil, ""},
		{"like an unknown pin", 404, "not_found", "PUT", "/v1/users/" + bob + "/likes/" + unknownSibling(t, pin), nil, nil, ""},
		{"list pins of a pin id as board", 404, "not_found", "GET", "/v1/boards/" + pin + "/pins", nil, nil, ""},
		{"comment on a board", 404, "not_found", "POST", "/v1/pins/" + board + "/comments", map[string]any{"author_id": bob, "text": "x"}, nil, ""},
		{"board of an unknown owner", 404, "not_found", "POST", "/v1/boards", map[string]any{"owner_id": unknownSibling(t, alice), "name": "x"}, nil, ""},
		{"pin on an unknown board", 404, "not_found", "POST", "/v1/pins", map[string]any{"board_id": unknownSibling(t, board)}, nil, ""},

		// Bodies.
		{"body over 64 KiB", 413, "too_large", "POST", "/v1/pins", `{"board_id":"` + board + `","description":"` + big + `"}`, nil, ""},
		{"data over its limit", 413, "too_large", "POST", "/v1/pins", bigData, nil, "data"},
		{"patch data over its limit", 413, "too_large", "PATCH", "/v1/pins/" + pin, map[string]any{"data": map[string]string{"blob": strings.Repeat("y", 9<<10)}}, nil, ""},
		{"text/plain body", 415, "unsupported_media_type", "POST", "/v1/pins", `{"board_id":"` + board + `"}`, []string{"Content-Type", "text/plain"}, ""},
		{"no content type", 415, "unsupported_media_type", "POST", "/v1/boards", `{"owner_id":"` + alice + `","name":"x"}`, []string{"Content-Type", ""}, ""},
		{"patch as text/plain", 415, "unsupported_media_type", "PATCH", "/v1/pins/" + pin, `{"description":"x"}`, []string{"Content-Type", "text/plain"}, ""},
		{"merge-patch to a create", 415, "unsupported_media_type", "POST", "/v1/users", `{"username":"carol"}`, []string{"Content-Type", "application/merge-patch+json"}, ""},
		{"invalid JSON", 400, "invalid_argument", "POST", "/v1/pins", `{"board_id":`, nil, "JSON"},
		{"invalid JSON in a patch", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, `{"description":}`, nil, "JSON"},
		{"trailing data", 400, "invalid_argument", "POST", "/v1/pins", `{"board_id":"` + board + `"} {}`, nil, "trailing"},
		{"trailing data in a patch", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, `{"description":"x"}]`, nil, ""},
		{"unknown field", 400, "invalid_argument", "POST", "/v1/pins", map[string]any{"board_id": board, "color": "red"}, nil, "color"},
		{"owner_id on a pin", 400, "invalid_argument", "POST", "/v1/pins", map[string]any{"board_id": board, "owner_id": bob}, nil, "owner_id"},
		{"empty body", 400, "invalid_argument", "POST", "/v1/pins", "", nil, ""},
		{"array body", 400, "invalid_argument", "POST", "/v1/pins", `[]`, nil, ""},
		{"wrong JSON type", 400, "invalid_argument", "POST", "/v1/pins", `{"board_id":12}`, nil, "board_id"},
		{"board_id of a user", 400, "invalid_argument", "POST", "/v1/pins", map[string]any{"board_id": alice}, nil, "board_id"},
		{"missing board_id", 400, "invalid_argument", "POST", "/v1/pins", map[string]any{"description": "x"}, nil, "board_id"},
		{"bad username", 400, "invalid_argument", "POST", "/v1/users", map[string]any{"username": "no spaces"}, nil, "username"},
		{"data not an object", 400, "invalid_argument", "POST", "/v1/users", map[string]any{"username": "carol", "data": []int{1}}, nil, "data"},

		// Patches.
		{"patch owner_id", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, map[string]any{"owner_id": bob}, nil, "owner_id"},
		{"patch board_id", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, map[string]any{"board_id": board}, nil, "board_id"},
		{"patch id", 400, "invalid_argument", "PATCH", "/v1/users/" + alice, map[string]any{"id": alice}, nil, "read-only"},
		{"patch version", 400, "invalid_argument", "PATCH", "/v1/users/" + alice, map[string]any{"version": 7}, nil, "read-only"},
		{"patch created_at", 400, "invalid_argument", "PATCH", "/v1/boards/" + board, map[string]any{"created_at": "2020-01-01T00:00:00Z"}, nil, "read-only"},
		{"patch active", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, map[string]any{"active": false}, nil, "active"},
		{"patch an unknown field", 400, "invalid_argument", "PATCH", "/v1/users/" + alice, map[string]any{"bio": "x"}, nil, "bio"},
		{"patch removes a required field", 400, "invalid_argument", "PATCH", "/v1/users/" + alice, `{"username":null}`, nil, "username"},
		{"patch a wrong JSON type", 400, "invalid_argument", "PATCH", "/v1/boards/" + board, `{"name":5}`, nil, "name"},
		{"patch that is not an object", 400, "invalid_argument", "PATCH", "/v1/boards/" + board, `"name"`, nil, ""},
		{"If-Match not an entity tag", 400, "invalid_argument", "PATCH", "/v1/boards/" + board, `{"name":"x"}`, []string{"If-Match", "1"}, ""},
		{"If-Match stale", 412, "version_mismatch", "PATCH", "/v1/boards/" + board, `{"name":"x"}`, []string{"If-Match", `"9"`}, ""},
		{"If-Match stale on delete", 412, "version_mismatch", "DELETE", "/v1/boards/" + board, nil, []string{"If-Match", `"9"`}, ""},

		// Moves.
		{"move with both anchors", 400, "invalid_argument", "PUT", "/v1/boards/" + board + "/pins/" + pin + "/position", map[string]any{"before": f.pins[1], "after": f.pins[2]}, nil, ""},
		{"move with no anchor", 400, "invalid_argument", "PUT", "/v1/boards/" + board + "/pins/" + pin + "/position", map[string]any{}, nil, ""},
		{"move next to itself", 400, "invalid_argument", "PUT", "/v1/boards/" + board + "/pins/" + pin + "/position", map[string]any{"before": pin}, nil, ""},
		{"move before a board", 400, "invalid_argument", "PUT", "/v1/boards/" + board + "/pins/" + pin + "/position", map[string]any{"before": board}, nil, "before"},
		{"move before an unknown pin", 404, "not_found", "PUT", "/v1/boards/" + board + "/pins/" + pin + "/position", map[string]any{"before": unknownSibling(t, pin)}, nil, ""},

		// Paging.
		{"limit 0", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?limit=0", nil, nil, "limit"},
		{"limit negative", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?limit=-1", nil, nil, "limit"},
		{"limit 251", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?limit=251", nil, nil, "limit"},
		{"limit not a number", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?limit=ten", nil, nil, "limit"},
		{"limit empty", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?limit=", nil, nil, "limit"},
		{"limit twice", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?limit=1&limit=2", nil, nil, "limit"},
		{"offset negative", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?offset=-1", nil, nil, "offset"},
		{"offset too deep", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?offset=1000001", nil, nil, "offset"},
		{"order sideways", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?order=sideways", nil, nil, "order"},
		{"bad cursor", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?cursor=garbage", nil, nil, ""},
		{"cursor and offset", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?cursor=abc&offset=1", nil, nil, ""},
		{"feed with offset", 400, "invalid_argument", "GET", "/v1/users/" + bob + "/feed?offset=0", nil, nil, "offset"},
		{"feed with order", 400, "invalid_argument", "GET", "/v1/users/" + bob + "/feed?order=asc", nil, nil, "order"},
		{"feed bad limit", 400, "invalid_argument", "GET", "/v1/users/" + bob + "/feed?limit=0", nil, nil, "limit"},
		{"feed bad cursor", 400, "invalid_argument", "GET", "/v1/users/" + bob + "/feed?cursor=garbage", nil, nil, ""},

		// Multi-get and owners.
		{"multi-get without ids", 400, "invalid_argument", "GET", "/v1/pins", nil, nil, "ids"},
		{"multi-get malformed id", 400, "invalid_argument", "GET", "/v1/pins?ids=" + pin + "," + idNotDecimal, nil, nil, "ids[1]"},
		{"multi-get over 100", 400, "invalid_argument", "GET", "/v1/pins?ids=" + strings.TrimSuffix(strings.Repeat(pin+",", 101), ","), nil, nil, "100"},
		{"owners malformed", 400, "invalid_argument", "POST", "/v1/pins/owners", map[string]any{"ids": []string{pin, "x1"}}, nil, `ids[1] "x1"`},
		{"owners of a board", 400, "invalid_argument", "POST", "/v1/pins/owners", map[string]any{"ids": []string{pin, pin, board}}, nil, "ids[2] \"" + board + "\""},
		{"owners number", 400, "invalid_argument", "POST", "/v1/pins/owners", `{"ids":[12]}`, nil, "ids[0]"},
		{"owners over 1000", 400, "invalid_argument", "POST", "/v1/pins/owners", map[string]any{"ids": slices.Repeat([]string{pin}, 1001)}, nil, "1000"},
		{"owners without ids", 400, "invalid_argument", "POST", "/v1/pins/owners", `{}`, nil, "ids"},
		{"owners as text/plain", 415, "unsupported_media_type", "POST", "/v1/pins/owners", `{"ids":[]}`, []string{"Content-Type", "text/plain"}, ""},

		// JSON nested thousands deep, at the top level and in data.
		{"top level nested 10000 arrays", 400, "invalid_argument", "POST", "/v1/pins", deepArrays(10000), nil, ""},
		{"top level nested 10000 objects", 400, "invalid_argument", "POST", "/v1/pins", deepObjects(10000), nil, ""},
		{"data nested 10000 arrays", 400, "invalid_argument", "POST", "/v1/pins", pinBody(`"data":{"a":` + deepArrays(10000) + `}`), nil, ""},
		{"data nested 10000 objects", 400, "invalid_argument", "POST", "/v1/pins", pinBody(`"data":` + deepObjects(10000)), nil, ""},
		{"data nested 40 objects", 400, "invalid_argument", "POST", "/v1/pins", pinBody(`"data":` + deepObjects(40)), nil, "nested"},
		{"user data nested 40 arrays", 400, "invalid_argument", "POST", "/v1/users", `{"username":"deep","data":{"a":` + deepArrays(40) + `}}`, nil, "nested"},
		{"patch nested 10000 arrays", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, deepArrays(10000), nil, ""},
		{"patch data nested 10000 objects", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, `{"data":` + deepObjects(10000) + `}`, nil, ""},
		{"patch data nested 40 objects", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, `{"data":` + deepObjects(40) + `}`, nil, "nested"},
		{"owners nested 10000 arrays", 400, "invalid_argument", "POST", "/v1/pins/owners", `{"ids":` + deepArrays(10000) + `}`, nil, ""},
		{"move nested 10000 objects", 400, "invalid_argument", "PUT", position, deepObjects(10000), nil, ""},

		// Invalid UTF-8 (raw bytes, not escapes) and lone surrogate escapes.
		{"invalid UTF-8 in a pin description", 400, "invalid_argument", "POST", "/v1/pins", pinBody("\"description\":\"bad \xff\xfe\""), nil, "UTF-8"},
		{"invalid UTF-8 in a username", 400, "invalid_argument", "POST", "/v1/users", "{\"username\":\"a\xff\xfe\"}", nil, ""},
		{"invalid UTF-8 in a display_name", 400, "invalid_argument", "POST", "/v1/users", "{\"username\":\"dora\",\"display_name\":\"\xff\xfe\"}", nil, "UTF-8"},
		{"invalid UTF-8 in a board name", 400, "invalid_argument", "POST", "/v1/boards", "{\"owner_id\":\"" + alice + "\",\"name\":\"\xff\xfe\"}", nil, "UTF-8"},
		{"invalid UTF-8 in a comment", 400, "invalid_argument", "POST", "/v1/pins/" + pin + "/comments", "{\"author_id\":\"" + bob + "\",\"text\":\"\xff\xfe\"}", nil, "UTF-8"},
		{"invalid UTF-8 in data", 400, "invalid_argument", "POST", "/v1/pins", pinBody("\"data\":{\"k\":\"\xff\xfe\"}"), nil, "UTF-8"},
		{"invalid UTF-8 in a data key", 400, "invalid_argument", "POST", "/v1/pins", pinBody("\"data\":{\"\xff\xfe\":1}"), nil, "UTF-8"},
		{"invalid UTF-8 in an owners id", 400, "invalid_argument", "POST", "/v1/pins/owners", "{\"ids\":[\"\xff\xfe\"]}", nil, ""},
		{"UTF-8 encoded surrogate", 400, "invalid_argument", "POST", "/v1/pins", pinBody("\"description\":\"\xed\xa0\x80\""), nil, "UTF-8"},
		{"overlong UTF-8", 400, "invalid_argument", "POST", "/v1/pins", pinBody("\"description\":\"\xc0\xaf\""), nil, "UTF-8"},
		{"patch invalid UTF-8 in a description", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, "{\"description\":\"bad \xff\xfe\"}", nil, "UTF-8"},
		{"patch invalid UTF-8 in data", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, "{\"data\":{\"k\":\"\xff\xfe\"}}", nil, "UTF-8"},
		{"patch invalid UTF-8 in a field name", 400, "invalid_argument", "PATCH", "/v1/users/" + alice, "{\"\xff\xfe\":1}", nil, ""},
		{"lone surrogate escape in data", 400, "invalid_argument", "POST", "/v1/pins", pinBody(`"data":{"k":"\ud800"}`), nil, "surrogate"},
		{"reversed surrogate escapes in data", 400, "invalid_argument", "POST", "/v1/pins", pinBody(`"data":{"k":"\udc00\ud800"}`), nil, "surrogate"},
		{"lone surrogate escape in a description", 400, "invalid_argument", "POST", "/v1/pins", pinBody(`"description":"\ud83d"`), nil, "surrogate"},
		{"patch lone surrogate escape in data", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, `{"data":{"\udfff":1}}`, nil, "surrogate"},

		// IDs: negative, beyond 2^64, with reserved bits, in every place an
		// id goes.
		{"negative id", 400, "invalid_argument", "GET", "/v1/pins/-5", nil, nil, "not a decimal"},
		{"negative id of a list", 400, "invalid_argument", "GET", "/v1/users/-5/followers", nil, nil, "not a decimal"},
		{"negative like target", 400, "invalid_argument", "PUT", "/v1/users/" + bob + "/likes/-5", nil, nil, "pin_id"},
		{"negative follow target", 400, "invalid_argument", "DELETE", "/v1/users/" + bob + "/following/-5", nil, nil, "target_id"},
		{"negative pin to move", 400, "invalid_argument", "PUT", "/v1/boards/" + board + "/pins/-5/position", map[string]any{"before": f.pins[1]}, nil, "pin_id"},
		{"negative board_id", 400, "invalid_argument", "POST", "/v1/pins", map[string]any{"board_id": "-5"}, nil, "board_id"},
		{"negative owner_id", 400, "invalid_argument", "POST", "/v1/boards", map[string]any{"owner_id": "-5", "name": "x"}, nil, "owner_id"},
		{"negative author_id", 400, "invalid_argument", "POST", "/v1/pins/" + pin + "/comments", map[string]any{"author_id": "-5", "text": "x"}, nil, "author_id"},
		{"negative anchor", 400, "invalid_argument", "PUT", position, map[string]any{"after": "-5"}, nil, "after"},
		{"negative id in a multi-get", 400, "invalid_argument", "GET", "/v1/pins?ids=" + pin + ",-5", nil, nil, "ids[1]"},
		{"negative id in owners", 400, "invalid_argument", "POST", "/v1/pins/owners", map[string]any{"ids": []string{"-5"}}, nil, "ids[0]"},
		{"negative number in owners", 400, "invalid_argument", "POST", "/v1/pins/owners", `{"ids":[-5]}`, nil, "ids[0]"},
		{"id of 2^64 in a list path", 400, "invalid_argument", "GET", "/v1/boards/" + idOverflow + "/pins", nil, nil, "not a decimal"},
		{"id of 1000 digits", 400, "invalid_argument", "GET", "/v1/users/" + idHuge, nil, nil, "not a decimal"},
		{"like target of 2^64", 400, "invalid_argument", "PUT", "/v1/users/" + bob + "/likes/" + idOverflow, nil, nil, "pin_id"},
		{"board_id of 2^64", 400, "invalid_argument", "POST", "/v1/pins", map[string]any{"board_id": idOverflow}, nil, "board_id"},
		{"owner_id of 1000 digits", 400, "invalid_argument", "POST", "/v1/boards", map[string]any{"owner_id": idHuge, "name": "x"}, nil, "owner_id"},
		{"anchor of 2^64", 400, "invalid_argument", "PUT", position, map[string]any{"before": idOverflow}, nil, "before"},
		{"id of 2^64 in a multi-get", 400, "invalid_argument", "GET", "/v1/users?ids=" + alice + "," + idOverflow, nil, nil, "ids[1]"},
		{"id of 2^64 in owners", 400, "invalid_argument", "POST", "/v1/pins/owners", map[string]any{"ids": []string{pin, idOverflow}}, nil, "ids[1]"},
		{"id with bit 63 set", 400, "invalid_argument", "GET", "/v1/pins/" + reservedPin(63), nil, nil, "reserved"},
		{"id with bit 62 set", 400, "invalid_argument", "DELETE", "/v1/pins/" + reservedPin(62), nil, nil, "reserved"},
		{"max uint64 id", 400, "invalid_argument", "PATCH", "/v1/pins/" + idMaxUint64, `{"description":"x"}`, nil, "reserved"},
		{"reserved bits in a list path", 400, "invalid_argument", "GET", "/v1/pins/" + reservedPin(63) + "/likers", nil, nil, "reserved"},
		{"reserved bits in a like target", 400, "invalid_argument", "PUT", "/v1/users/" + bob + "/likes/" + reservedPin(62), nil, nil, "reserved"},
		{"reserved bits in board_id", 400, "invalid_argument", "POST", "/v1/pins", map[string]any{"board_id": idReserved}, nil, "board_id"},
		{"reserved bits in author_id", 400, "invalid_argument", "POST", "/v1/pins/" + pin + "/comments", map[string]any{"author_id": idMaxUint64, "text": "x"}, nil, "author_id"},
		{"reserved bits in an anchor", 400, "invalid_argument", "PUT", position, map[string]any{"before": reservedPin(63)}, nil, "before"},
		{"reserved bits in a multi-get", 400, "invalid_argument", "GET", "/v1/pins?ids=" + reservedPin(62), nil, nil, "reserved"},
		{"reserved bits in owners", 400, "invalid_argument", "POST", "/v1/pins/owners", map[string]any{"ids": []string{pin, reservedPin(63)}}, nil, "reserved"},
		{"id as a float", 400, "invalid_argument", "GET", "/v1/pins/1e5", nil, nil, "not a decimal"},
		{"id in hex", 400, "invalid_argument", "GET", "/v1/pins/0x10", nil, nil, "not a decimal"},
		{"id in Arabic-Indic digits", 400, "invalid_argument", "GET", "/v1/pins/" + url.PathEscape("١٢٣"), nil, nil, "not a decimal"},

		// Secret boards, to another user: 404 as for a missing object, and
		// their flag is the owner's to change; saves: strict bodies.
		{"stranger reads a secret pin", 404, "not_found", "GET", "/v1/pins/" + secretPin, nil, asBob, "pin not found"},
		{"stranger lists a secret board", 404, "not_found", "GET", "/v1/boards/" + secretBoard + "/pins", nil, asBob, "board not found"},
		{"stranger makes a secret board public", 404, "not_found", "PATCH", "/v1/boards/" + secretBoard, `{"secret":false}`, asBob, "board not found"},
		{"stranger makes a board secret", 403, "forbidden", "PATCH", "/v1/boards/" + board, `{"secret":true}`, asBob, "another user"},
		{"stranger deletes a secret pin", 404, "not_found", "DELETE", "/v1/pins/" + secretPin, nil, asBob, "not found"},
		{"stranger pins on a secret board", 404, "not_found", "POST", "/v1/pins", map[string]any{"board_id": secretBoard}, asBob, "board not found"},
		{"stranger likes a secret pin", 404, "not_found", "PUT", "/v1/users/" + bob + "/likes/" + secretPin, nil, asBob, "pin not found"},
		{"stranger comments on a secret pin", 404, "not_found", "POST", "/v1/pins/" + secretPin + "/comments", map[string]any{"author_id": bob, "text": "hi"}, asBob, "pin not found"},
		{"stranger saves a secret pin", 404, "not_found", "POST", "/v1/pins/" + secretPin + "/saves", map[string]any{"board_id": bobBoard}, asBob, "pin not found"},
		{"service token saves a secret pin for a stranger", 404, "not_found", "POST", "/v1/pins/" + secretPin + "/saves", map[string]any{"board_id": bobBoard}, nil, "pin not found"},
		{"save to another's board", 403, "forbidden", "POST", "/v1/pins/" + pin + "/saves", map[string]any{"board_id": board}, asBob, ""},
		{"stranger patches a comment on a secret pin", 404, "not_found", "PATCH", "/v1/comments/" + secretComment, `{"text":"x"}`, asBob, "comment not found"},
		{"stranger deletes a comment on a secret pin", 404, "not_found", "DELETE", "/v1/comments/" + secretComment, nil, asBob, "comment not found"},
		{"stranger patches their comment on a pin made secret", 404, "not_found", "PATCH", "/v1/comments/" + bobComment, `{"text":"x"}`, asBob, "comment not found"},
		{"stranger deletes their comment on a pin made secret", 404, "not_found", "DELETE", "/v1/comments/" + bobComment, nil, asBob, "comment not found"},
		{"stranger unlikes a pin made secret", 404, "not_found", "DELETE", "/v1/users/" + bob + "/likes/" + flipPin, nil, asBob, "pin not found"},
		{"stranger asks whether they like a pin made secret", 404, "not_found", "GET", "/v1/users/" + bob + "/likes/" + flipPin, nil, asBob, "pin not found"},
		{"stranger moves a pin on a board made secret", 404, "not_found", "PUT", "/v1/boards/" + flipBoard + "/pins/" + flipPin + "/position", map[string]any{"before": flipPin2}, asBob, "board not found"},
		{"stranger deletes a board made secret", 404, "not_found", "DELETE", "/v1/boards/" + flipBoard, nil, asBob, "board not found"},

		// An idempotency key used by a pin create, with another request.
		{"key reused for a pin elsewhere", 422, "idempotency_key_reused", "POST", "/v1/pins", map[string]any{"board_id": board2}, usedKey, "another request"},
		{"key reused for a board", 422, "idempotency_key_reused", "POST", "/v1/boards", map[string]any{"owner_id": bob, "name": "x"}, usedKey, "another request"},
		{"key reused for a user", 422, "idempotency_key_reused", "POST", "/v1/users", map[string]any{"username": "keyed_again"}, usedKey, "another request"},
		{"key reused for a comment", 422, "idempotency_key_reused", "POST", "/v1/pins/" + pin + "/comments", map[string]any{"author_id": bob, "text": "x"}, usedKey, "another request"},
		{"key reused for a save", 422, "idempotency_key_reused", "POST", "/v1/pins/" + pin + "/saves", map[string]any{"board_id": bobBoard}, usedKey, "another request"},
		{"key reused for owners", 422, "idempotency_key_reused", "POST", "/v1/pins/owners", map[string]any{"ids": []string{pin}}, usedKey, "another request"},
		{"save without a board", 400, "invalid_argument", "POST", "/v1/pins/" + pin + "/saves", map[string]any{}, nil, "board_id"},
		{"save with an unknown field", 400, "invalid_argument", "POST", "/v1/pins/" + pin + "/saves", map[string]any{"board_id": bobBoard, "secret": true}, nil, ""},
		{"save of an unknown pin", 404, "not_found", "POST", "/v1/pins/" + unknownSibling(t, pin) + "/saves", map[string]any{"board_id": bobBoard}, nil, ""},
		{"save to an unknown board", 404, "not_found", "POST", "/v1/pins/" + pin + "/saves", map[string]any{"board_id": unknownSibling(t, board)}, nil, ""},
		{"secret that is no boolean", 400, "invalid_argument", "POST", "/v1/boards", map[string]any{"owner_id": alice, "name": "x", "secret": "yes"}, nil, ""},
		{"patch a board's secret with a string", 400, "invalid_argument", "PATCH", "/v1/boards/" + board, `{"secret":"yes"}`, nil, ""},
		{"patch a pin's secret", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, `{"secret":true}`, nil, "read-only"},
		{"patch a pin's saved_from", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, `{"saved_from":"` + f.pins[1] + `"}`, nil, "read-only"},

		// Cursors: tampered, foreign, duplicated.
		{"tampered cursor", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?cursor=" + url.QueryEscape(flipMiddle(boardCursor)), nil, nil, "cursor"},
		{"truncated cursor", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?cursor=" + url.QueryEscape(boardCursor[:len(boardCursor)-1]), nil, nil, "cursor"},
		{"cursor with padding", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?cursor=" + url.QueryEscape(boardCursor+"="), nil, nil, "cursor"},
		{"cursor of another board", 400, "invalid_argument", "GET", "/v1/boards/" + board2 + "/pins?cursor=" + url.QueryEscape(boardCursor), nil, nil, "cursor"},
		{"cursor of the other order", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?order=asc&cursor=" + url.QueryEscape(boardCursor), nil, nil, "cursor"},
		{"board cursor on a user's pins", 400, "invalid_argument", "GET", "/v1/users/" + alice + "/pins?cursor=" + url.QueryEscape(boardCursor), nil, nil, "cursor"},
		{"followers cursor on following", 400, "invalid_argument", "GET", "/v1/users/" + alice + "/following?cursor=" + url.QueryEscape(followersCursor), nil, nil, "cursor"},
		{"followers cursor of another user", 400, "invalid_argument", "GET", "/v1/users/" + bob + "/followers?cursor=" + url.QueryEscape(followersCursor), nil, nil, "cursor"},
		{"followers cursor on the feed", 400, "invalid_argument", "GET", "/v1/users/" + alice + "/feed?cursor=" + url.QueryEscape(followersCursor), nil, nil, "cursor"},
		{"cursor twice", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?cursor=" + url.QueryEscape(boardCursor) + "&cursor=" + url.QueryEscape(boardCursor), nil, nil, "cursor"},
		{"feed cursor twice", 400, "invalid_argument", "GET", "/v1/users/" + bob + "/feed?cursor=a&cursor=b", nil, nil, "cursor"},

		// Paging parameters out of range or given twice.
		{"limit 1000000", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?limit=1000000", nil, nil, "limit"},
		{"limit beyond int64", 400, "invalid_argument", "GET", "/v1/users/" + alice + "/followers?limit=99999999999999999999", nil, nil, "limit"},
		{"feed limit 1000000", 400, "invalid_argument", "GET", "/v1/users/" + bob + "/feed?limit=1000000", nil, nil, "limit"},
		{"offset beyond int64", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?offset=99999999999999999999", nil, nil, "offset"},
		{"offset twice", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?offset=0&offset=1", nil, nil, "offset"},
		{"order twice", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?order=asc&order=desc", nil, nil, "order"},
		{"ids twice", 400, "invalid_argument", "GET", "/v1/pins?ids=" + pin + "&ids=" + f.pins[1], nil, nil, "ids"},
		{"users ids twice", 400, "invalid_argument", "GET", "/v1/users?ids=" + alice + "&ids=" + bob, nil, nil, "ids"},
		{"boards ids twice", 400, "invalid_argument", "GET", "/v1/boards?ids=" + board + "&ids=" + board, nil, nil, "ids"},

		// Multi-gets over the maximum, and bodies over the limit, on every
		// route that takes them.
		{"users multi-get over 100", 400, "invalid_argument", "GET", "/v1/users?ids=" + strings.TrimSuffix(strings.Repeat(alice+",", 101), ","), nil, nil, "100"},
		{"boards multi-get over 100", 400, "invalid_argument", "GET", "/v1/boards?ids=" + strings.TrimSuffix(strings.Repeat(board+",", 101), ","), nil, nil, "100"},
		{"multi-get of 1000 ids", 400, "invalid_argument", "GET", "/v1/pins?ids=" + strings.TrimSuffix(strings.Repeat(pin+",", 1000), ","), nil, nil, "100"},
		{"user body over 64 KiB", 413, "too_large", "POST", "/v1/users", `{"username":"dora","display_name":"` + big + `"}`, nil, ""},
		{"board body over 64 KiB", 413, "too_large", "POST", "/v1/boards", `{"owner_id":"` + alice + `","name":"` + big + `"}`, nil, ""},
		{"comment body over 64 KiB", 413, "too_large", "POST", "/v1/pins/" + pin + "/comments", `{"author_id":"` + bob + `","text":"` + big + `"}`, nil, ""},
		{"patch body over 64 KiB", 413, "too_large", "PATCH", "/v1/pins/" + pin, `{"description":"` + big + `"}`, nil, ""},
		{"owners body over 64 KiB", 413, "too_large", "POST", "/v1/pins/owners", `{"ids":["` + big + `"]}`, nil, ""},
		{"move body over 64 KiB", 413, "too_large", "PUT", position, `{"before":"` + big + `"}`, nil, ""},
		{"body of 1 MiB", 413, "too_large", "POST", "/v1/pins", pinBody(`"description":"` + strings.Repeat("z", 1<<20) + `"`), nil, ""},
		{"body over 64 KiB of whitespace", 413, "too_large", "POST", "/v1/pins", pinBody(strings.Repeat(" ", 70<<10) + `"link":""`), nil, ""},
	}
	cases = append(cases, sqlInjectionCases(f, board2)...)
	cases = append(cases, ambiguousJSONCases(f)...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &server{t: t, base: s.base, client: s.client, logs: s.logs}
			s.client = &http.Client{Timeout: s.client.Timeout, Transport: retarget(s.client.Transport, t)}
			p := s.fail(c.status, c.code, c.method, c.path, c.body, c.headers...)
			if !strings.Contains(p.Detail, c.detail) {
				t.Errorf("detail %q does not mention %q", p.Detail, c.detail)
			}
			u, err := url.Parse(c.path)
			if err != nil {
				t.Fatal(err)
			}
			if p.Instance != u.Path {
				t.Errorf("instance %q, want %q", p.Instance, u.Path)
			}
		})
	}
	if after := f.snapshot(s); after != before {
		t.Fatalf("refused requests changed state:\nbefore %+v\nafter  %+v", before, after)
	}
	s.requireSameDB(beforeDB, s.dbState())
	t.Logf("%d hostile requests refused; %d tables unchanged", len(cases), len(beforeDB))
}

// hostileCase is one request TestServeErrorsWriteNothing expects refused.
type hostileCase struct {
	name    string
	status  int
	code    string
	method  string
	path    string
	body    any
	headers []string
	detail  string // a substring the detail must hold
}

// flipMiddle returns s with its middle character changed (to another
// character of the base64url alphabet).
func flipMiddle(s string) string {
	b := []byte(s)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// sqlInjection are classic injection strings. Where a field or parameter
// has a syntax (ids, usernames, limits, cursors), they must be refused
// before any query; free text stores them verbatim (see
// TestServeStoresInjectionVerbatim).
var sqlInjection = []string{
	`'; DROP TABLE objects; --`,
	`" OR 1=1 --`,
	`1 UNION SELECT local_id, doc FROM pins --`,
	`1; DROP DATABASE db00000`,
	`1' OR '1'='1`,
	`1)) OR SLEEP(5)#`,
	`\'; DELETE FROM users WHERE 1=1; --`,
}

// sqlInjectionCases puts every injection string in every path parameter,
// query parameter and syntactic body field.
func sqlInjectionCases(f fixture, board2 string) []hostileCase {
	alice, bob, board, pin := f.alice.ID, f.bob.ID, f.board.ID, f.pins[0]
	var cases []hostileCase
	for i, inj := range sqlInjection {
		p, q := url.PathEscape(inj), url.QueryEscape(inj)
		j, err := json.Marshal(inj)
		if err != nil {
			panic(err)
		}
		js := string(j)
		add := func(name string, status int, code, method, path string, body any, detail string, headers ...string) {
			cases = append(cases, hostileCase{fmt.Sprintf("sqli %d %s", i, name), status, code, method, path, body, headers, detail})
		}
		const bad = "invalid_argument"
		// Path parameters.
		add("in a pin id", 400, bad, "GET", "/v1/pins/"+p, nil, "id")
		add("in a comment id", 400, bad, "GET", "/v1/comments/"+p, nil, "id")
		add("in a patched board id", 400, bad, "PATCH", "/v1/boards/"+p, `{"name":"x"}`, "id")
		add("in a deleted user id", 400, bad, "DELETE", "/v1/users/"+p, nil, "id")
		add("in an id to decode", 400, bad, "GET", "/v1/ids/"+p, nil, "id")
		add("in a list owner", 400, bad, "GET", "/v1/users/"+p+"/followers", nil, "id")
		add("in a board of a list", 400, bad, "GET", "/v1/boards/"+p+"/pins", nil, "id")
		add("in a feed owner", 400, bad, "GET", "/v1/users/"+p+"/feed", nil, "id")
		add("in a like target", 400, bad, "PUT", "/v1/users/"+bob+"/likes/"+p, nil, "pin_id")
		add("in an unlike target", 400, bad, "DELETE", "/v1/users/"+bob+"/likes/"+p, nil, "pin_id")
		add("in a follow target", 400, bad, "PUT", "/v1/users/"+bob+"/following/"+p, nil, "target_id")
		add("in a liker", 400, bad, "PUT", "/v1/users/"+p+"/likes/"+pin, nil, "id")
		add("in a pin to move", 400, bad, "PUT", "/v1/boards/"+board+"/pins/"+p+"/position", map[string]any{"before": f.pins[1]}, "pin_id")
		add("in a pin to comment", 400, bad, "POST", "/v1/pins/"+p+"/comments", map[string]any{"author_id": bob, "text": "x"}, "id")
		// Query parameters.
		add("in ids", 400, bad, "GET", "/v1/pins?ids="+q, nil, "ids[0]")
		add("in users ids", 400, bad, "GET", "/v1/users?ids="+alice+","+q, nil, "ids[1]")
		add("in boards ids", 400, bad, "GET", "/v1/boards?ids="+q+","+board2, nil, "ids[0]")
		add("in a cursor", 400, bad, "GET", "/v1/boards/"+board+"/pins?cursor="+q, nil, "cursor")
		add("in a feed cursor", 400, bad, "GET", "/v1/users/"+bob+"/feed?cursor="+q, nil, "cursor")
		add("in limit", 400, bad, "GET", "/v1/boards/"+board+"/pins?limit="+q, nil, "limit")
		add("in offset", 400, bad, "GET", "/v1/users/"+alice+"/followers?offset="+q, nil, "offset")
		add("in order", 400, bad, "GET", "/v1/boards/"+board+"/pins?order="+q, nil, "order")
		add("as a query parameter name", 400, bad, "GET", "/v1/pins?"+q+"=1", nil, "ids")
		// Body fields with a syntax, and field names.
		add("in username", 400, bad, "POST", "/v1/users", `{"username":`+js+`}`, "username")
		add("in a patched username", 400, bad, "PATCH", "/v1/users/"+alice, `{"username":`+js+`}`, "username")
		add("in owner_id", 400, bad, "POST", "/v1/boards", `{"owner_id":`+js+`,"name":"x"}`, "owner_id")
		add("in board_id", 400, bad, "POST", "/v1/pins", `{"board_id":`+js+`}`, "board_id")
		add("in author_id", 400, bad, "POST", "/v1/pins/"+pin+"/comments", `{"author_id":`+js+`,"text":"x"}`, "author_id")
		add("in before", 400, bad, "PUT", "/v1/boards/"+board+"/pins/"+pin+"/position", `{"before":`+js+`}`, "before")
		add("in after", 400, bad, "PUT", "/v1/boards/"+board+"/pins/"+pin+"/position", `{"after":`+js+`}`, "after")
		add("in owners ids", 400, bad, "POST", "/v1/pins/owners", `{"ids":["`+pin+`",`+js+`]}`, "ids[1]")
		add("as a create field name", 400, bad, "POST", "/v1/pins", `{"board_id":"`+board+`",`+js+`:"x"}`, "")
		add("as a patch field name", 400, bad, "PATCH", "/v1/pins/"+pin, `{`+js+`:"x"}`, "")
		// Headers.
		add("in If-Match", 400, bad, "PATCH", "/v1/boards/"+board, `{"name":"x"}`, "If-Match", "If-Match", inj)
		if strings.Contains(inj, ",") { // a list of entity tags
			add("in a quoted If-Match", 400, bad, "DELETE", "/v1/pins/"+pin, nil, "If-Match", "If-Match", js)
		} else { // an entity tag no version has
			add("in a quoted If-Match", 412, "version_mismatch", "DELETE", "/v1/pins/"+pin, nil, "If-Match", "If-Match", js)
		}
	}
	return cases
}

// retarget returns the spec-validating transport reporting to t.
func retarget(rt http.RoundTripper, t *testing.T) http.RoundTripper {
	st := *rt.(*specTransport)
	st.t = t
	return &st
}

// TestServeStoresInjectionVerbatim: SQL injection strings in free-text
// fields (and in the keys and values of data) are ordinary text: they are
// accepted, stored verbatim (as the shard row shows), read back byte for
// byte through every read path, and no table is harmed. So are data nested
// to the deepest level a body may have, one level short of what MariaDB's
// JSON_VALID refuses.
func TestServeStoresInjectionVerbatim(t *testing.T) {
	s := startServer(t)
	tablesBefore := s.settledDB()
	texts := append(slices.Clone(sqlInjection),
		"Robert'); DROP TABLE students;--",
		"`; SHOW DATABASES; `",
		`%_\% LIKE wildcards and a backslash \`,
		"/* comment */ SELECT 1; -- ",
		`0x27 CHAR(39) \x27 \' \\`,
		"NUL \x00 inside, a line\nbreak, a\ttab",
		"emoji \U0001F600, U+2028 \u2028 and U+FFFE \ufffe",
	)
	type stored struct {
		id, board string
		text      string
	}
	var all []stored
	// verify reads an object back by GET and multi-get and checks its
	// text fields and data hold exactly what was sent.
	verify := func(coll, id string, want map[string]string, data map[string]string) {
		t.Helper()
		bodies := [][]byte{s.must(http.StatusOK, http.MethodGet, "/v1/"+coll+"/"+id, nil).Body}
		if coll != "comments" { // comments have no multi-get
			var many struct {
				Items []json.RawMessage `json:"items"`
			}
			s.must(http.StatusOK, http.MethodGet, "/v1/"+coll+"?ids="+id, nil).decode(t, &many)
			if len(many.Items) != 1 {
				t.Fatalf("multi-get of %s: %d items", id, len(many.Items))
			}
			bodies = append(bodies, many.Items[0])
		}
		for _, body := range bodies {
			var got map[string]json.RawMessage
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			for field, w := range want {
				var v string
				if err := json.Unmarshal(got[field], &v); err != nil || v != w {
					t.Fatalf("%s %s: %s is %q, want %q byte for byte", coll, id, field, v, w)
				}
			}
			var d map[string]string
			if err := json.Unmarshal(got["data"], &d); err != nil || !maps.Equal(d, data) {
				t.Fatalf("%s %s: data %s, want %v", coll, id, got["data"], data)
			}
		}
	}
	owner := s.create("/v1/users", map[string]any{"username": "robert_tables"}).ID
	for i, text := range texts {
		// Each text is also a member name of data, except one holding NUL:
		// a name with NUL is refused (ambiguous_json, see
		// ambiguousJSONCases), a value with NUL is kept.
		data := map[string]string{"k": text}
		if !strings.ContainsRune(text, 0) {
			data[text] = "v"
		}
		u := s.create("/v1/users", map[string]any{"username": fmt.Sprintf("u%d", i), "display_name": text, "data": data}).ID
		verify("users", u, map[string]string{"display_name": text}, data)
		b := s.create("/v1/boards", map[string]any{"owner_id": owner, "name": text, "description": text, "data": data}).ID
		verify("boards", b, map[string]string{"name": text, "description": text}, data)
		p := s.create("/v1/pins", map[string]any{"board_id": b, "description": text, "link": text, "image_url": text, "data": data}).ID
		verify("pins", p, map[string]string{"description": text, "link": text, "image_url": text}, data)
		c := s.create("/v1/pins/"+p+"/comments", map[string]any{"author_id": u, "text": text, "data": data}).ID
		verify("comments", c, map[string]string{"text": text}, data)
		all = append(all, stored{p, b, text})
		// The same through a patch, as JSON and as a merge patch.
		patched := text + " (patched)"
		pdata := maps.Clone(data)
		pdata["k"] = patched
		s.must(http.StatusOK, http.MethodPatch, "/v1/pins/"+p, map[string]any{"description": patched, "data": map[string]any{"k": patched}})
		verify("pins", p, map[string]string{"description": patched, "link": text}, pdata)
		s.must(http.StatusOK, http.MethodPatch, "/v1/comments/"+c, map[string]any{"text": patched}, "Content-Type", "application/merge-patch+json")
		verify("comments", c, map[string]string{"text": patched}, data)
		all[len(all)-1].text = patched
	}
	// The lists hold them too, and the shard rows hold the text itself.
	var l list
	s.must(http.StatusOK, http.MethodGet, "/v1/users/"+owner+"/pins?limit=250&order=asc", nil).decode(t, &l)
	if len(l.Items) != len(all) {
		t.Fatalf("%d pins listed, want %d", len(l.Items), len(all))
	}
	db, err := sqlx.Open("mysql", s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i, st := range all {
		if l.Items[i].ID != st.id || l.Items[i].Description != st.text {
			t.Fatalf("pin %d listed as %s %q, want %s %q", i, l.Items[i].ID, l.Items[i].Description, st.id, st.text)
		}
		id, err := strconv.ParseUint(st.id, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		var doc []byte
		table := quoteIdent(fmt.Sprintf("%s%05d", s.prefix, id>>46&0xffff)) + ".pins"
		if err := db.Get(&doc, "SELECT doc FROM "+table+" WHERE local_id = ?", id&(1<<36-1)); err != nil {
			t.Fatalf("read pin %s from its shard: %v", st.id, err)
		}
		var row struct{ Description string }
		if err := json.Unmarshal(doc, &row); err != nil || row.Description != st.text {
			t.Fatalf("pin %s's row holds description %q (%v), want %q", st.id, row.Description, err, st.text)
		}
	}

	// Data nested as deep as a body may nest: the body's object is level
	// 1, so data holds MaxJSONDepth-1 levels.
	deepest := strings.Repeat(`{"a":`, api.MaxJSONDepth-1) + `"x"` + strings.Repeat("}", api.MaxJSONDepth-1)
	p := s.create("/v1/pins", `{"board_id":"`+s.create("/v1/boards", map[string]any{"owner_id": owner, "name": "deep"}).ID+`","data":`+deepest+`}`)
	if got := s.get("/v1/pins/" + p.ID); string(got.Data) != deepest {
		t.Fatalf("deepest data came back as %s", got.Data)
	}
	s.must(http.StatusOK, http.MethodPatch, "/v1/pins/"+p.ID, `{"data":`+deepest+`}`)
	s.fail(http.StatusBadRequest, "invalid_argument", http.MethodPatch, "/v1/pins/"+p.ID, `{"data":{"b":`+deepest+`}}`)

	// Numbers at the edges of what every parser reads alike are kept as
	// written; beyond them (1e999999, an integer beyond 2^53-1) they are
	// refused (ambiguousJSONCases), since each client would read another
	// number or none.
	edges := `{"m":9007199254740991,"n":-1.7976931348623157e308,"o":1e-400,"p":0.30000000000000004}`
	p = s.create("/v1/pins", `{"board_id":"`+all[0].board+`","data":`+edges+`}`)
	if got := s.get("/v1/pins/" + p.ID); string(got.Data) != edges {
		t.Fatalf("edge numbers came back as %s", got.Data)
	}
	for _, huge := range []string{`{"m":123456789012345678901234567890}`, `{"n":1e999999}`} {
		s.fail(http.StatusBadRequest, "ambiguous_json", http.MethodPost, "/v1/pins", `{"board_id":"`+all[0].board+`","data":`+huge+`}`)
	}

	// Every table of every shard is still there.
	tablesAfter := s.dbState()
	if !slices.Equal(slices.Sorted(maps.Keys(tablesBefore)), slices.Sorted(maps.Keys(tablesAfter))) {
		t.Fatalf("the shard tables changed:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(tablesBefore)), slices.Sorted(maps.Keys(tablesAfter)))
	}
}
