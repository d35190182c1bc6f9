package main

import "strings"

// ambiguousJSONCases are bodies that are JSON, or nearly, but that parsers
// read differently (a JavaScript client, a proxy, a Go client generated
// from the spec): each must be refused, before anything is written, at
// every route that takes a body and at every depth.
func ambiguousJSONCases(f fixture) []hostileCase {
	alice, bob, board, pin := f.alice.ID, f.bob.ID, f.board.ID, f.pins[0]
	position := "/v1/boards/" + board + "/pins/" + pin + "/position"
	pinBody := func(rest string) string { return `{"board_id":"` + board + `",` + rest + `}` }
	utf16 := []string{"Content-Type", "application/json; charset=utf-16"}
	const amb, bad = "ambiguous_json", "invalid_argument"
	return []hostileCase{
		// Numbers beyond a double, and integers beyond 2^53-1, in data.
		{"data number 1e400", 400, amb, "POST", "/v1/pins", pinBody(`"data":{"n":1e400}`), nil, "data.n"},
		{"data number -1e400 in an array", 400, amb, "POST", "/v1/users", `{"username":"dora","data":{"l":[1,-1e400]}}`, nil, "data.l[1]"},
		{"data number of 400 digits", 400, amb, "POST", "/v1/boards", `{"owner_id":"` + alice + `","name":"x","data":{"n":` + strings.Repeat("9", 400) + `.0}}`, nil, "double"},
		{"data integer 2^53", 400, amb, "POST", "/v1/pins/" + pin + "/comments", `{"author_id":"` + bob + `","text":"x","data":{"n":9007199254740992}}`, nil, "2^53"},
		{"patch data number 1e400", 400, amb, "PATCH", "/v1/pins/" + pin, `{"data":{"n":1E+400}}`, nil, "data.n"},
		{"patch data integer -2^63", 400, amb, "PATCH", "/v1/users/" + alice, `{"data":{"n":-9223372036854775808}}`, nil, "data.n"},
		{"board_id as a huge JSON number", 400, amb, "POST", "/v1/pins", `{"board_id":` + strings.Repeat("9", 1000) + `}`, nil, "board_id"},
		{"id of 2^64 as a JSON number in owners", 400, amb, "POST", "/v1/pins/owners", `{"ids":[18446744073709551616]}`, nil, "ids[0]"},
		{"anchor as a big JSON number", 400, amb, "PUT", position, `{"before":241294492511762325}`, nil, "before"},

		// Duplicate member names, at the top and deep in data, also when
		// one of them is escaped.
		{"duplicate username", 400, amb, "POST", "/v1/users", `{"username":"dora","username":"eve"}`, nil, "twice"},
		{"duplicate escaped username", 400, amb, "POST", "/v1/users", `{"username":"dora","user\u006eame":"eve"}`, nil, "username"},
		{"duplicate board_id", 400, amb, "POST", "/v1/pins", `{"board_id":"` + board + `","board_id":"` + board + `"}`, nil, "board_id"},
		{"duplicate in data", 400, amb, "POST", "/v1/pins", pinBody(`"data":{"a":1,"b":2,"a":3}`), nil, "data.a"},
		{"duplicate deep in data", 400, amb, "POST", "/v1/pins", pinBody(`"data":{"l":[{"x":{"y":1,"y":2}}]}`), nil, "data.l[0].x.y"},
		{"patch duplicate member", 400, amb, "PATCH", "/v1/pins/" + pin, `{"description":"a","description":"b"}`, nil, "description"},
		{"patch duplicate in data", 400, amb, "PATCH", "/v1/users/" + alice, `{"data":{"lang":"fr","lang":null}}`, nil, "data.lang"},
		{"owners duplicate ids", 400, amb, "POST", "/v1/pins/owners", `{"ids":[],"ids":["` + pin + `"]}`, nil, "ids"},
		{"move duplicate before", 400, amb, "PUT", position, `{"before":"` + f.pins[1] + `","before":"` + f.pins[2] + `"}`, nil, "before"},
		{"comment duplicate text", 400, amb, "POST", "/v1/pins/" + pin + "/comments", `{"author_id":"` + bob + `","text":"a","text":"b"}`, nil, "text"},

		// Member names in another case (encoding/json alone would match
		// them to the field), and NUL in a name.
		{"Username in another case", 400, bad, "POST", "/v1/users", `{"Username":"dora"}`, nil, `"Username"`},
		{"username and USERNAME", 400, bad, "POST", "/v1/users", `{"username":"dora","USERNAME":"eve"}`, nil, `"USERNAME"`},
		{"Board_ID in another case", 400, bad, "POST", "/v1/pins", `{"Board_ID":"` + board + `"}`, nil, "Board_ID"},
		{"NUL in a data name", 400, amb, "POST", "/v1/pins", pinBody(`"data":{"a\u0000b":1}`), nil, "NUL"},
		{"patch NUL in a data name", 400, amb, "PATCH", "/v1/pins/" + pin, `{"data":{"\u0000":1}}`, nil, "NUL"},

		// A byte-order mark, and a charset other than UTF-8.
		{"byte-order mark", 400, amb, "POST", "/v1/users", "\xef\xbb\xbf{\"username\":\"dora\"}", nil, "byte-order mark"},
		{"patch byte-order mark", 400, amb, "PATCH", "/v1/pins/" + pin, "\xef\xbb\xbf{\"description\":\"x\"}", nil, "byte-order mark"},
		{"charset utf-16", 415, "unsupported_media_type", "POST", "/v1/users", `{"username":"dora"}`, utf16, "UTF-8"},
		{"charset latin1 on a patch", 415, "unsupported_media_type", "PATCH", "/v1/pins/" + pin, `{"description":"x"}`, []string{"Content-Type", "application/merge-patch+json; charset=iso-8859-1"}, "UTF-8"},
		{"charset utf-16 on owners", 415, "unsupported_media_type", "POST", "/v1/pins/owners", `{"ids":[]}`, utf16, ""},
		{"charset utf-16 on a move", 415, "unsupported_media_type", "PUT", position, `{"before":"` + f.pins[1] + `"}`, utf16, ""},
	}
}
