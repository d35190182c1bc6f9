// A client generated from the previous release's spec (previous/openapi.yaml;
// types in gen/previous.ts) does what such a client does, against this
// server: its calls must still work, and every field it reads must still be
// there with the type it was generated with. It knows nothing of what came
// later (counts, viewer, usernames by name, time ranges), so it uses none of
// it; the fields it does not know must not get in its way.
//
//   PINSTORE_URL=http://127.0.0.1:8080 PINSTORE_TOKEN=<token> npx tsx clients/ts/previous.ts
//
// (after npm run ts:gen); the Go test TestTypeScriptClients runs it.

import type { components, paths } from "./gen/previous";
import { check, client, done, eq, eventually, fails, isCount, isID, isTime, ok, run, suffix } from "./lib";

type User = components["schemas"]["User"];
type Board = components["schemas"]["Board"];
type Pin = components["schemas"]["Pin"];
type Comment = components["schemas"]["Comment"];

const api = client<paths>();

let ann: User, bob: User;
let board: Board;
const pins: Pin[] = [];
let comment: Comment;

// The fields the old client reads, with the types it was generated with.
function checkUser(u: User, what: string): void {
  check(isID(u.id) && u.type === "user" && typeof u.username === "string" && typeof u.display_name === "string", `${what}: ${JSON.stringify(u)}`);
  check(typeof u.data === "object" && u.data !== null && isTime(u.created_at) && isTime(u.updated_at) && Number.isInteger(u.version), `${what}: ${JSON.stringify(u)}`);
}

function checkBoard(b: Board, what: string): void {
  check(isID(b.id) && b.type === "board" && isID(b.owner_id) && typeof b.name === "string" && typeof b.description === "string", `${what}: ${JSON.stringify(b)}`);
  check(typeof b.data === "object" && isTime(b.created_at) && isTime(b.updated_at) && Number.isInteger(b.version), `${what}: ${JSON.stringify(b)}`);
}

function checkPin(p: Pin, what: string): void {
  check(isID(p.id) && p.type === "pin" && isID(p.board_id) && isID(p.owner_id), `${what}: ${JSON.stringify(p)}`);
  check(typeof p.link === "string" && typeof p.description === "string" && typeof p.image_url === "string", `${what}: ${JSON.stringify(p)}`);
  check(typeof p.data === "object" && isTime(p.created_at) && isTime(p.updated_at) && Number.isInteger(p.version), `${what}: ${JSON.stringify(p)}`);
}

function checkComment(c: Comment, what: string): void {
  check(isID(c.id) && c.type === "comment" && isID(c.pin_id) && isID(c.author_id) && typeof c.text === "string", `${what}: ${JSON.stringify(c)}`);
  check(typeof c.data === "object" && isTime(c.created_at) && isTime(c.updated_at) && Number.isInteger(c.version), `${what}: ${JSON.stringify(c)}`);
}

// A list page as the old client reads it.
function checkPage(l: { items: unknown[]; next_cursor?: string; count: number }, what: string): void {
  check(Array.isArray(l.items) && isCount(l.count) && (l.next_cursor === undefined || typeof l.next_cursor === "string"), `${what}: ${JSON.stringify(l)}`);
}

void run("previous release's client", [
  [
    "users: create, read, edit with If-Match",
    async () => {
      for (const name of ["ann", "bob"]) {
        const r = await api.POST("/v1/users", { body: { username: `${name}_${suffix}`, display_name: name, data: { theme: "dark" } } });
        const u = ok(r, 201, `create ${name}`);
        checkUser(u, `create ${name}`);
        eq([u.username, u.display_name, u.data, u.version], [`${name}_${suffix}`, name, { theme: "dark" }, 1], `create ${name}`);
        eq([r.response.headers.get("ETag"), r.response.headers.get("Location")], ['"1"', `/v1/users/${u.id}`], `create ${name}: headers`);
        if (name === "ann") ann = u;
        else bob = u;
      }
      const got = ok(await api.GET("/v1/users/{id}", { params: { path: { id: ann.id } } }), 200, "get ann");
      checkUser(got, "get ann");
      eq(got.id, ann.id, "get ann");
      const r = await api.PATCH("/v1/users/{id}", { params: { path: { id: ann.id }, header: { "If-Match": '"1"' } }, body: { display_name: "Ann", data: { theme: null } } });
      const edited = ok(r, 200, "edit ann");
      checkUser(edited, "edit ann");
      eq([edited.display_name, edited.data, edited.version, r.response.headers.get("ETag")], ["Ann", {}, 2, '"2"'], "ann edited");
      const p = fails(await api.PATCH("/v1/users/{id}", { params: { path: { id: ann.id }, header: { "If-Match": '"1"' } }, body: { display_name: "x" } }), 412, "version_mismatch", "a stale edit");
      check(typeof p.detail === "string", "412 detail");
      const many = ok(await api.GET("/v1/users", { params: { query: { ids: [bob.id, ann.id] } } }), 200, "users by ids");
      eq([many.items.map((u) => u.id), many.not_found], [[bob.id, ann.id], []], "users by ids");
    },
  ],
  [
    "boards, pins and comments: create and read",
    async () => {
      board = ok(await api.POST("/v1/boards", { body: { owner_id: ann.id, name: "Gardens" } }), 201, "create board");
      checkBoard(board, "create board");
      for (let i = 0; i < 4; i++) {
        const p = ok(await api.POST("/v1/pins", { body: { board_id: board.id, description: `pin ${i}`, image_url: `https://example.com/${i}.jpg` } }), 201, `create pin ${i}`);
        checkPin(p, `create pin ${i}`);
        eq([p.board_id, p.owner_id, p.link, p.image_url], [board.id, ann.id, "", `https://example.com/${i}.jpg`], `pin ${i}`);
        pins.push(p);
      }
      checkBoard(ok(await api.GET("/v1/boards/{id}", { params: { path: { id: board.id } } }), 200, "get board"), "get board");
      checkPin(ok(await api.GET("/v1/pins/{id}", { params: { path: { id: pins[0].id } } }), 200, "get pin"), "get pin");
      comment = ok(await api.POST("/v1/pins/{id}/comments", { params: { path: { id: pins[0].id } }, body: { author_id: bob.id, text: "lovely" } }), 201, "comment");
      checkComment(comment, "comment");
      checkComment(ok(await api.GET("/v1/comments/{id}", { params: { path: { id: comment.id } } }), 200, "get comment"), "get comment");
      const comments = ok(await api.GET("/v1/pins/{id}/comments", { params: { path: { id: pins[0].id } } }), 200, "pin 0's comments");
      checkPage(comments, "pin 0's comments");
      eq([comments.items.map((c) => c.id), comments.count], [[comment.id], 1], "pin 0's comments");
    },
  ],
  [
    "a board's pins by cursor, and moved by hand",
    async () => {
      const seen: string[] = [];
      let cursor: string | undefined;
      for (let page = 0; ; page++) {
        check(page < 10, "too many pages");
        const l = ok(await api.GET("/v1/boards/{id}/pins", { params: { path: { id: board.id }, query: { limit: 3, cursor } } }), 200, `board page ${page}`);
        checkPage(l, `board page ${page}`);
        eq(l.count, 4, `board page ${page}: count`);
        l.items.forEach((p) => checkPin(p, `board page ${page}`));
        seen.push(...l.items.map((p) => p.id));
        if (!l.next_cursor) break;
        cursor = l.next_cursor;
      }
      eq(seen, [3, 2, 1, 0].map((i) => pins[i].id), "the board, newest first");
      done(await api.PUT("/v1/boards/{id}/pins/{pin_id}/position", { params: { path: { id: board.id, pin_id: pins[0].id } }, body: { after: pins[3].id } }), "pin 0 after pin 3");
      const l = ok(await api.GET("/v1/boards/{id}/pins", { params: { path: { id: board.id }, query: { offset: 0, limit: 10 } } }), 200, "the board by offset");
      eq(l.items.map((p) => p.id), [3, 0, 2, 1].map((i) => pins[i].id), "the board's new order");
    },
  ],
  [
    "follow and like, seen from both sides",
    async () => {
      done(await api.PUT("/v1/users/{id}/following/{target_id}", { params: { path: { id: bob.id, target_id: ann.id } } }), "bob follows ann");
      done(await api.PUT("/v1/users/{id}/likes/{pin_id}", { params: { path: { id: bob.id, pin_id: pins[1].id } } }), "bob likes pin 1");
      const following = ok(await api.GET("/v1/users/{id}/following", { params: { path: { id: bob.id } } }), 200, "bob's following");
      const followers = ok(await api.GET("/v1/users/{id}/followers", { params: { path: { id: ann.id } } }), 200, "ann's followers");
      const likes = ok(await api.GET("/v1/users/{id}/likes", { params: { path: { id: bob.id } } }), 200, "bob's likes");
      const likers = ok(await api.GET("/v1/pins/{id}/likers", { params: { path: { id: pins[1].id } } }), 200, "pin 1's likers");
      for (const [what, l] of [["following", following], ["followers", followers], ["likes", likes], ["likers", likers]] as const) {
        checkPage(l, what);
      }
      following.items.forEach((u) => checkUser(u, "following"));
      followers.items.forEach((u) => checkUser(u, "followers"));
      likes.items.forEach((p) => checkPin(p, "likes"));
      likers.items.forEach((u) => checkUser(u, "likers"));
      eq(
        [following.items.map((u) => u.id), followers.items.map((u) => u.id), likes.items.map((p) => p.id), likers.items.map((u) => u.id)],
        [[ann.id], [bob.id], [pins[1].id], [bob.id]],
        "both sides of each edge",
      );
      eq([following.count, followers.count, likes.count, likers.count], [1, 1, 1, 1], "counts");
    },
  ],
  [
    "the feed fills with the followee's pins",
    async () => {
      await eventually("bob's feed", async () => {
        const feed = ok(await api.GET("/v1/users/{id}/feed", { params: { path: { id: bob.id }, query: { limit: 2 } } }), 200, "bob's feed");
        feed.items.forEach((p) => checkPin(p, "feed"));
        check(typeof feed.next_cursor === "string", "a first feed page of 2 with 4 pins has a next_cursor");
        const rest = ok(await api.GET("/v1/users/{id}/feed", { params: { path: { id: bob.id }, query: { limit: 10, cursor: feed.next_cursor } } }), 200, "bob's feed, page 2");
        eq([...feed.items, ...rest.items].map((p) => p.id).sort(), pins.map((p) => p.id).sort(), "bob's feed holds ann's pins");
      });
    },
  ],
  [
    "owners, ID anatomy, pins by ids",
    async () => {
      const owners = ok(await api.POST("/v1/pins/owners", { body: { ids: [pins[0].id, pins[1].id] } }), 200, "owners");
      eq([owners.owners[pins[0].id], owners.owners[pins[1].id], owners.not_found], [ann.id, ann.id, []], "owners");
      const info = ok(await api.GET("/v1/ids/{id}", { params: { path: { id: "241294492511762325" } } }), 200, "decode");
      eq([info.id, info.shard, info.type, info.type_name, info.local_id], ["241294492511762325", 3429, 1, "pin", 7075733], "the published vector");
      const many = ok(await api.GET("/v1/pins", { params: { query: { ids: [pins[2].id, pins[3].id] } } }), 200, "pins by ids");
      many.items.forEach((p) => checkPin(p, "pins by ids"));
      eq(many.items.map((p) => p.id), [pins[2].id, pins[3].id], "pins by ids");
      const boards = ok(await api.GET("/v1/users/{id}/boards", { params: { path: { id: ann.id } } }), 200, "ann's boards");
      checkPage(boards, "ann's boards");
      boards.items.forEach((b) => checkBoard(b, "ann's boards"));
      const userPins = ok(await api.GET("/v1/users/{id}/pins", { params: { path: { id: ann.id }, query: { order: "asc" } } }), 200, "ann's pins");
      eq(userPins.items.map((p) => p.id), pins.map((p) => p.id), "ann's pins, oldest first");
    },
  ],
  [
    "undo and delete; the errors an old client handles",
    async () => {
      done(await api.DELETE("/v1/users/{id}/likes/{pin_id}", { params: { path: { id: bob.id, pin_id: pins[1].id } } }), "bob unlikes pin 1");
      done(await api.DELETE("/v1/users/{id}/following/{target_id}", { params: { path: { id: bob.id, target_id: ann.id } } }), "bob unfollows ann");
      eq(ok(await api.GET("/v1/pins/{id}/likers", { params: { path: { id: pins[1].id } } }), 200, "likers").count, 0, "pin 1's likers after the unlike");
      done(await api.DELETE("/v1/comments/{id}", { params: { path: { id: comment.id } } }), "delete the comment");
      done(await api.DELETE("/v1/pins/{id}", { params: { path: { id: pins[3].id }, header: { "If-Match": '"1"' } } }), "delete pin 3 at version 1");
      const gone = fails(await api.GET("/v1/pins/{id}", { params: { path: { id: pins[3].id } } }), 404, "not_found", "a deleted pin");
      check(typeof gone.detail === "string" && typeof gone.title === "string", "problem fields");
      fails(await api.GET("/v1/comments/{id}", { params: { path: { id: comment.id } } }), 404, "not_found", "a deleted comment");
      fails(await api.GET("/v1/boards/{id}", { params: { path: { id: pins[0].id } } }), 404, "not_found", "a pin ID as a board");
      fails(await api.GET("/v1/users/{id}", { params: { path: { id: "12x" } } }), 400, "invalid_argument", "a malformed ID");
      fails(await api.POST("/v1/boards", { body: { owner_id: ann.id, name: "" } }), 400, "invalid_argument", "a board without a name");
      const many = ok(await api.GET("/v1/pins", { params: { query: { ids: [pins[3].id, pins[2].id] } } }), 200, "pins by ids");
      eq([many.items.map((p) => p.id), many.not_found], [[pins[2].id], [pins[3].id]], "a deleted pin is not found");
      done(await api.DELETE("/v1/boards/{id}", { params: { path: { id: board.id } } }), "delete the board");
      fails(await api.GET("/v1/pins/{id}", { params: { path: { id: pins[0].id } } }), 404, "not_found", "a pin of a deleted board");
    },
  ],
]);
