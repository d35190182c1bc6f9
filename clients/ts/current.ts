// A client generated from this repository's openapi.yaml (openapi-typescript
// for the types in gen/current.ts, openapi-fetch for the calls) drives the
// server through a product's screens: users with unique usernames, boards,
// pins, follows and likes, saves and secret boards, board sections, the "do I like / do I follow" calls one at a
// time and for a set, lists and the feed carrying the viewer's state, counts,
// time ranges, pages by cursor, consistency tokens, and the errors a client
// must handle.
//
//   PINSTORE_URL=http://127.0.0.1:8080 PINSTORE_TOKEN=<token> npx tsx clients/ts/current.ts
//
// (after npm run ts:gen); the Go test TestTypeScriptClients runs it.

import type { components, paths } from "./gen/current";
import { baseUrl, check, client, done, eq, eventually, fails, isCount, isID, isTime, ok, run, sleep, suffix } from "./lib";

type User = components["schemas"]["User"];
type Pin = components["schemas"]["Pin"];

const api = client<paths>();

// What the steps share.
let ann: User, bob: User, carol: User;
let board: components["schemas"]["Board"];
const pins: Pin[] = [];
const marks: string[] = []; // a time before each pin's create

function checkUser(u: User, what: string): void {
  check(isID(u.id) && u.type === "user" && typeof u.username === "string" && typeof u.display_name === "string", `${what}: user ${JSON.stringify(u)}`);
  check(isTime(u.created_at) && isTime(u.updated_at) && Number.isInteger(u.version) && typeof u.data === "object", `${what}: user ${JSON.stringify(u)}`);
  const c = u.counts;
  check(isCount(c.followers) && isCount(c.following) && isCount(c.boards) && isCount(c.pins), `${what}: counts ${JSON.stringify(c)}`);
}

async function createUser(username: string): Promise<User> {
  const r = await api.POST("/v1/users", { body: { username, display_name: `${username} the tester` } });
  const u = ok(r, 201, `create ${username}`);
  checkUser(u, `create ${username}`);
  eq(r.response.headers.get("ETag"), '"1"', `create ${username}: ETag`);
  eq(r.response.headers.get("Location"), `/v1/users/${u.id}`, `create ${username}: Location`);
  eq(u.counts, { followers: 0, following: 0, boards: 0, pins: 0 }, `create ${username}: counts`);
  return u;
}

async function getUser(id: string): Promise<User> {
  return ok(await api.GET("/v1/users/{id}", { params: { path: { id } } }), 200, `get user ${id}`);
}

// walk reads a list by cursor, limit entries a page, and checks every page.
async function walkBoardPins(limit: number, query: { since?: string; until?: string } = {}): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  let count: number | undefined;
  for (let page = 0; page < 100; page++) {
    const l = ok(
      await api.GET("/v1/boards/{id}/pins", { params: { path: { id: board.id }, query: { limit, cursor, ...query } } }),
      200,
      `board pins page ${page}`,
    );
    check(l.items.length <= limit, `page ${page}: ${l.items.length} items, limit ${limit}`);
    check(count === undefined || l.count === count, `page ${page}: count changed from ${count} to ${l.count}`);
    count = l.count;
    ids.push(...l.items.map((p) => p.id));
    if (l.next_cursor === undefined) {
      return ids;
    }
    check(l.items.length === limit, `page ${page}: a short page (${l.items.length}) with a next_cursor`);
    cursor = l.next_cursor;
  }
  throw new Error("more than 100 pages");
}

void run("current client", [
  [
    "users: created with counts; a username is unique whatever its case",
    async () => {
      ann = await createUser(`Ann_${suffix}`);
      bob = await createUser(`bob_${suffix}`);
      carol = await createUser(`carol_${suffix}`);
      const p = fails(await api.POST("/v1/users", { body: { username: `ANN_${suffix}` } }), 409, "username_taken", "a second Ann");
      check(p.detail?.includes(`ANN_${suffix}`), `409 detail ${JSON.stringify(p.detail)}`);
    },
  ],
  [
    "usernames: found in any case, 404 when nobody holds the name",
    async () => {
      const r = await api.GET("/v1/usernames/{username}", { params: { path: { username: `ann_${suffix}`.toUpperCase() } } });
      const u = ok(r, 200, "by username");
      eq([u.id, u.username], [ann.id, ann.username], "by username");
      eq(r.response.headers.get("ETag"), '"1"', "by username: ETag");
      fails(await api.GET("/v1/usernames/{username}", { params: { path: { username: `nobody_${suffix}` } } }), 404, "not_found", "an unknown name");
      fails(await api.GET("/v1/usernames/{username}", { params: { path: { username: "no spaces" } } }), 400, "invalid_argument", "a malformed name");
    },
  ],
  [
    "boards and pins: created, counted on the board, the pin and the owner",
    async () => {
      board = ok(await api.POST("/v1/boards", { body: { owner_id: carol.id, name: "Kitchens", description: "ideas" } }), 201, "create board");
      check(isID(board.id) && board.owner_id === carol.id && board.counts.pins === 0, `board ${JSON.stringify(board)}`);
      for (let i = 0; i < 5; i++) {
        marks.push(new Date().toISOString());
        await sleep(3);
        const p = ok(await api.POST("/v1/pins", { body: { board_id: board.id, description: `pin ${i}`, link: "https://example.com/" + i } }), 201, `create pin ${i}`);
        check(isID(p.id) && p.board_id === board.id && p.owner_id === carol.id, `pin ${JSON.stringify(p)}`);
        eq(p.counts, { likes: 0, comments: 0, saves: 0 }, `pin ${i}: counts`);
        eq([p.saved_from, p.secret], [null, false], `pin ${i}: no save, not secret`);
        check(p.viewer === undefined, `pin ${i}: a viewer without ?viewer`);
        pins.push(p);
        await sleep(3);
      }
      const b = ok(await api.GET("/v1/boards/{id}", { params: { path: { id: board.id } } }), 200, "get board");
      eq(b.counts, { pins: 5, sections: 0 }, "board counts");
      const c = await getUser(carol.id);
      eq([c.counts.boards, c.counts.pins], [1, 5], "carol's board and pin counts");
    },
  ],
  [
    "follow and like: 204, then asked one at a time (204/404) and for a set",
    async () => {
      done(await api.PUT("/v1/users/{id}/following/{target_id}", { params: { path: { id: bob.id, target_id: carol.id } } }), "bob follows carol");
      done(await api.PUT("/v1/users/{id}/following/{target_id}", { params: { path: { id: bob.id, target_id: carol.id } } }), "bob follows carol again");
      done(await api.PUT("/v1/users/{id}/following/{target_id}", { params: { path: { id: ann.id, target_id: bob.id } } }), "ann follows bob");
      for (const [who, pin] of [[ann, 1], [ann, 3], [bob, 3]] as const) {
        done(await api.PUT("/v1/users/{id}/likes/{pin_id}", { params: { path: { id: who.id, pin_id: pins[pin].id } } }), `${who.username} likes pin ${pin}`);
      }
      done(await api.GET("/v1/users/{id}/following/{target_id}", { params: { path: { id: bob.id, target_id: carol.id } } }), "does bob follow carol");
      fails(await api.GET("/v1/users/{id}/following/{target_id}", { params: { path: { id: carol.id, target_id: bob.id } } }), 404, "not_found", "does carol follow bob");
      done(await api.GET("/v1/users/{id}/likes/{pin_id}", { params: { path: { id: ann.id, pin_id: pins[1].id } } }), "does ann like pin 1");
      fails(await api.GET("/v1/users/{id}/likes/{pin_id}", { params: { path: { id: ann.id, pin_id: pins[0].id } } }), 404, "not_found", "does ann like pin 0");

      const ids = [pins[3].id, pins[0].id, pins[1].id, board.id, pins[3].id];
      const liked = ok(await api.GET("/v1/users/{id}/likes/contains", { params: { path: { id: ann.id }, query: { ids } } }), 200, "ann's likes among a set");
      eq(liked.items.map((e) => [e.id, e.liked]), [[pins[3].id, true], [pins[0].id, false], [pins[1].id, true], [board.id, false]], "likes/contains, in request order, duplicates once");
      const follows = ok(
        await api.GET("/v1/users/{id}/following/contains", { params: { path: { id: bob.id }, query: { ids: [ann.id, carol.id] } } }),
        200,
        "bob's follows among a set",
      );
      eq(follows.items.map((e) => [e.id, e.following]), [[ann.id, false], [carol.id, true]], "following/contains");
    },
  ],
  [
    "counts follow the edges",
    async () => {
      const p3 = ok(await api.GET("/v1/pins/{id}", { params: { path: { id: pins[3].id } } }), 200, "get pin 3");
      eq(p3.counts, { likes: 2, comments: 0, saves: 0 }, "pin 3 counts");
      eq((await getUser(carol.id)).counts.followers, 1, "carol's followers");
      const b = await getUser(bob.id);
      eq([b.counts.following, b.counts.followers], [1, 1], "bob follows one, one follows bob");
    },
  ],
  [
    "viewer: lists of pins and users, and the feed, carry the viewer's state",
    async () => {
      const page = ok(await api.GET("/v1/boards/{id}/pins", { params: { path: { id: board.id }, query: { viewer: ann.id } } }), 200, "board pins for ann");
      eq(page.items.map((p) => [p.id, p.viewer?.liked]), [4, 3, 2, 1, 0].map((i) => [pins[i].id, i === 1 || i === 3]), "what ann liked, newest first");
      const plain = ok(await api.GET("/v1/boards/{id}/pins", { params: { path: { id: board.id } } }), 200, "board pins for nobody");
      check(plain.items.every((p) => p.viewer === undefined), "viewer state without ?viewer");
      const followers = ok(await api.GET("/v1/users/{id}/followers", { params: { path: { id: carol.id }, query: { viewer: ann.id } } }), 200, "carol's followers for ann");
      eq(followers.items.map((u) => [u.id, u.viewer?.following]), [[bob.id, true]], "ann follows carol's follower bob");
      const likers = ok(await api.GET("/v1/pins/{id}/likers", { params: { path: { id: pins[3].id }, query: { viewer: bob.id } } }), 200, "pin 3's likers for bob");
      eq(likers.items.map((u) => `${u.id}:${u.viewer?.following}`).sort(), [`${ann.id}:false`, `${bob.id}:false`].sort(), "likers for bob");
      await eventually("bob's feed holds carol's pins", async () => {
        const feed = ok(await api.GET("/v1/users/{id}/feed", { params: { path: { id: bob.id }, query: { viewer: ann.id, limit: 10 } } }), 200, "bob's feed for ann");
        eq(feed.items.map((p) => [p.id, p.viewer?.liked]), [4, 3, 2, 1, 0].map((i) => [pins[i].id, i === 1 || i === 3]), "bob's feed for ann");
      });
    },
  ],
  [
    "pages by cursor: every entry once, in order, with one count",
    async () => {
      const all = await walkBoardPins(250);
      eq(all, [4, 3, 2, 1, 0].map((i) => pins[i].id), "the board, newest first");
      for (const limit of [1, 2, 3]) {
        eq(await walkBoardPins(limit), all, `pages of ${limit}`);
      }
      const asc = ok(await api.GET("/v1/boards/{id}/pins", { params: { path: { id: board.id }, query: { order: "asc", offset: 1, limit: 2 } } }), 200, "asc by offset");
      eq(asc.items.map((p) => p.id), [pins[1].id, pins[2].id], "oldest first, offset 1");
      fails(await api.GET("/v1/boards/{id}/pins", { params: { path: { id: board.id }, query: { cursor: "not-a-cursor" } } }), 400, "invalid_argument", "a forged cursor");
    },
  ],
  [
    "since/until: a time range, paged by cursor",
    async () => {
      eq(await walkBoardPins(1, { since: marks[1], until: marks[3] }), [pins[2].id, pins[1].id], "pins added from mark 1 to before mark 3");
      fails(await api.GET("/v1/boards/{id}/pins", { params: { path: { id: board.id }, query: { since: marks[3], until: marks[1] } } }), 400, "invalid_argument", "since after until");
      const likes = ok(await api.GET("/v1/users/{id}/likes", { params: { path: { id: ann.id }, query: { since: marks[0] } } }), 200, "ann's likes since mark 0");
      eq(likes.items.map((p) => p.id), [pins[3].id, pins[1].id], "ann's likes, newest first");
    },
  ],
  [
    "consistency tokens: a read sends one back and gets it again, a malformed one is refused",
    async () => {
      const token = "default=0-1-1";
      const r = await api.GET("/v1/pins/{id}", { params: { path: { id: pins[0].id }, header: { "Pinstore-Consistency": token } } });
      ok(r, 200, "a read with a token");
      eq(r.response.headers.get("Pinstore-Consistency"), token, "the token, echoed (this server has no replica reads, so it adds nothing)");
      fails(await api.GET("/v1/pins/{id}", { params: { path: { id: pins[0].id }, header: { "Pinstore-Consistency": "not a token" } } }), 400, "invalid_argument", "a malformed token");
    },
  ],
  [
    "edits: If-Match, 412 on a stale version, a pin moved by hand",
    async () => {
      const r = await api.PATCH("/v1/users/{id}", { params: { path: { id: ann.id }, header: { "If-Match": '"1"' } }, body: { display_name: "Ann" } });
      const u = ok(r, 200, "edit ann at version 1");
      eq([u.version, u.display_name, r.response.headers.get("ETag")], [2, "Ann", '"2"'], "ann at version 2");
      fails(await api.PATCH("/v1/users/{id}", { params: { path: { id: ann.id }, header: { "If-Match": '"1"' } }, body: { display_name: "Anne" } }), 412, "version_mismatch", "a stale edit");
      fails(await api.PATCH("/v1/users/{id}", { params: { path: { id: bob.id } }, body: { username: `ann_${suffix}` } }), 409, "username_taken", "bob renamed to ann");
      done(await api.PUT("/v1/boards/{id}/pins/{pin_id}/position", { params: { path: { id: board.id, pin_id: pins[0].id } }, body: { before: pins[4].id } }), "pin 0 to the top");
      eq(await walkBoardPins(2), [0, 4, 3, 2, 1].map((i) => pins[i].id), "the board's new order");
      fails(await api.GET("/v1/boards/{id}/pins", { params: { path: { id: board.id }, query: { since: marks[0] } } }), 400, "invalid_argument", "a time range on a hand-ordered board");
    },
  ],
  [
    "saves: a new pin naming its source, once per board; secret boards flag their pins",
    async () => {
      const annBoard = ok(await api.POST("/v1/boards", { body: { owner_id: ann.id, name: "Saved" } }), 201, "ann's board");
      eq(annBoard.secret, false, "a board is public by default");
      const first = await api.POST("/v1/pins/{id}/saves", { params: { path: { id: pins[4].id } }, body: { board_id: annBoard.id } });
      const saved = ok(first, 201, "ann saves pin 4");
      eq([saved.saved_from, saved.owner_id, saved.board_id, saved.description], [pins[4].id, ann.id, annBoard.id, pins[4].description], "the saved pin");
      eq(first.response.headers.get("Location"), `/v1/pins/${saved.id}`, "the saved pin's Location");
      const again = ok(await api.POST("/v1/pins/{id}/saves", { params: { path: { id: pins[4].id } }, body: { board_id: annBoard.id } }), 200, "ann saves pin 4 again");
      eq(again.id, saved.id, "the same pin");
      const saves = ok(await api.GET("/v1/pins/{id}/saves", { params: { path: { id: pins[4].id } } }), 200, "pin 4's saves");
      eq([saves.items.map((p) => p.id), saves.count], [[saved.id], 1], "pin 4's saves list");
      eq(ok(await api.GET("/v1/pins/{id}", { params: { path: { id: pins[4].id } } }), 200, "get pin 4").counts.saves, 1, "pin 4's saves count");

      const secret = ok(await api.POST("/v1/boards", { body: { owner_id: ann.id, name: "Surprise", secret: true } }), 201, "a secret board");
      const hidden = ok(await api.POST("/v1/pins/{id}/saves", { params: { path: { id: pins[1].id } }, body: { board_id: secret.id } }), 201, "a save to the secret board");
      eq([secret.secret, hidden.secret], [true, true], "the secret board and its pin");
      const open = ok(await api.PATCH("/v1/boards/{id}", { params: { path: { id: secret.id } }, body: { secret: false } }), 200, "the board made public");
      eq(open.secret, false, "the board is public");
      const shown = ok(await api.GET("/v1/pins/{id}", { params: { path: { id: hidden.id } } }), 200, "its pin");
      eq([shown.secret, shown.version], [false, 2], "its pin is public, at version 2");
      fails(await api.POST("/v1/pins/{id}/saves", { params: { path: { id: pins[4].id } }, body: { board_id: pins[4].id } }), 400, "invalid_argument", "a pin ID as the board");
    },
  ],
  [
    "sections: made last in a board's order, reordered, pins moved in, between and out, deleted with the pins kept",
    async () => {
      const trips = ok(await api.POST("/v1/boards", { body: { owner_id: carol.id, name: "Trips" } }), 201, "carol's trips board");
      const sec = async (name: string) => {
        const r = await api.POST("/v1/boards/{id}/sections", { params: { path: { id: trips.id } }, body: { name } });
        const s = ok(r, 201, `section ${name}`);
        eq([s.type, s.board_id, s.owner_id, s.name, s.secret, s.counts], ["section", trips.id, carol.id, name, false, { pins: 0 }], `section ${name}`);
        eq(r.response.headers.get("Location"), `/v1/sections/${s.id}`, `section ${name}: Location`);
        return s;
      };
      const [a, b, c] = [await sec("Alps"), await sec("Beaches"), await sec("Cities")];
      const order = async () => {
        const l = ok(await api.GET("/v1/boards/{id}/sections", { params: { path: { id: trips.id }, query: { limit: 250 } } }), 200, "the board's sections");
        eq(l.count, l.items.length, "the sections count");
        return l.items;
      };
      eq((await order()).map((s) => s.id), [a.id, b.id, c.id], "sections in the order they were made");
      done(await api.PUT("/v1/boards/{id}/sections/{section_id}/position", { params: { path: { id: trips.id, section_id: c.id } }, body: { before: a.id } }), "Cities first");
      eq((await order()).map((s) => s.id), [c.id, a.id, b.id], "the new order");

      const p = ok(await api.POST("/v1/pins", { body: { board_id: trips.id, description: "Matterhorn", section_id: a.id } }), 201, "a pin made in Alps");
      eq(p.section_id, a.id, "the pin names its section");
      const moved = ok(await api.PUT("/v1/pins/{id}/section", { params: { path: { id: p.id } }, body: { section_id: b.id } }), 200, "the pin moved to Beaches");
      eq([moved.section_id, moved.version], [b.id, 2], "the moved pin");
      const again = ok(await api.PUT("/v1/pins/{id}/section", { params: { path: { id: p.id } }, body: { section_id: b.id } }), 200, "moved there again");
      eq(again.version, 2, "moving a pin where it is changes nothing");
      const inB = ok(await api.GET("/v1/sections/{id}/pins", { params: { path: { id: b.id } } }), 200, "Beaches' pins");
      eq([inB.items.map((x) => x.id), inB.count], [[p.id], 1], "Beaches holds the pin");
      eq(ok(await api.GET("/v1/sections/{id}", { params: { path: { id: a.id } } }), 200, "Alps").counts.pins, 0, "Alps holds none");
      const out = ok(await api.PUT("/v1/pins/{id}/section", { params: { path: { id: p.id } }, body: { section_id: null } }), 200, "out of any section");
      eq(out.section_id, null, "the pin is in no section");
      ok(await api.PUT("/v1/pins/{id}/section", { params: { path: { id: p.id } }, body: { section_id: a.id } }), 200, "back into Alps");

      const renamed = ok(await api.PATCH("/v1/sections/{id}", { params: { path: { id: a.id } }, body: { name: "Mountains" } }), 200, "Alps renamed");
      eq(renamed.name, "Mountains", "the new name");
      const foreign = await api.POST("/v1/boards/{id}/sections", { params: { path: { id: board.id } }, body: { name: "Elsewhere" } });
      fails(await api.PUT("/v1/pins/{id}/section", { params: { path: { id: p.id } }, body: { section_id: ok(foreign, 201, "another board's section").id } }), 400, "invalid_argument", "another board's section");
      fails(await api.POST("/v1/boards/{id}/sections", { params: { path: { id: trips.id } }, body: { name: "x".repeat(201) } }), 400, "invalid_argument", "a name too long");

      done(await api.DELETE("/v1/sections/{id}", { params: { path: { id: a.id } } }), "Mountains deleted");
      fails(await api.GET("/v1/sections/{id}", { params: { path: { id: a.id } } }), 404, "not_found", "a deleted section");
      eq(ok(await api.GET("/v1/pins/{id}", { params: { path: { id: p.id } } }), 200, "the pin").section_id, null, "its pin stays, in no section");
      eq((await order()).map((s) => s.id), [c.id, b.id], "the sections left");
      const t = ok(await api.GET("/v1/boards/{id}", { params: { path: { id: trips.id } } }), 200, "the trips board");
      eq(t.counts, { pins: 1, sections: 2 }, "the board's counts");
    },
  ],
  [
    "errors: 400, 404 and a deleted object",
    async () => {
      fails(await api.GET("/v1/pins/{id}", { params: { path: { id: "0" } } }), 400, "invalid_argument", "pin 0");
      fails(await api.GET("/v1/pins/{id}", { params: { path: { id: "not-an-id" } } }), 400, "invalid_argument", "a malformed id");
      fails(await api.GET("/v1/pins/{id}", { params: { path: { id: board.id } } }), 404, "not_found", "a board ID as a pin");
      done(await api.DELETE("/v1/pins/{id}", { params: { path: { id: pins[2].id } } }), "delete pin 2");
      fails(await api.GET("/v1/pins/{id}", { params: { path: { id: pins[2].id } } }), 404, "not_found", "a deleted pin");
      const many = ok(await api.GET("/v1/pins", { params: { query: { ids: [pins[2].id, pins[1].id] } } }), 200, "pins by ids");
      eq([many.items.map((p) => p.id), many.not_found], [[pins[1].id], [pins[2].id]], "a deleted pin is not found");
    },
  ],
  [
    "a problem's type is a page a person can read",
    async () => {
      const p = fails(await api.GET("/v1/pins/{id}", { params: { path: { id: pins[2].id } } }), 404, "not_found", "a deleted pin");
      const docs = await fetch(new URL(p.type, baseUrl + "/"));
      eq([docs.status, docs.headers.get("Content-Type")?.split(";")[0]], [200, "text/html"], "the problem type's page");
      const spec = await (await fetch(`${baseUrl}/openapi.yaml`)).text();
      check(/^ *## not_found *$/m.test(spec), "the spec has no section for not_found under the errors tag");
    },
  ],
]);
