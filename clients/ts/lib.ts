// What both client tests share: where the server is, a runner of named
// steps that stops at the first failed expectation, and expectations on
// the { data, error, response } that openapi-fetch returns.
//
// A script exits 0 when every step passed, 1 otherwise, and prints one
// line per step and a closing "N passed, N failed".

import createClient from "openapi-fetch";

export const baseUrl = required("PINSTORE_URL").replace(/\/+$/, "");

// client makes an openapi-fetch client of a generated paths type that
// calls the server with the token, sending arrays in the query as the spec
// says (ids=1,2,3: style form, explode false).
export function client<Paths extends {}>() {
  return createClient<Paths>({
    baseUrl,
    headers: { Authorization: `Bearer ${token}` },
    querySerializer: { array: { style: "form", explode: false } },
  });
}
export const token = required("PINSTORE_TOKEN");

// suffix makes the names a run creates its own, so a script can run again
// against a server that kept the last run's data.
export const suffix = Date.now().toString(36) + Math.floor(Math.random() * 1e6).toString(36);

function required(name: string): string {
  const v = process.env[name];
  if (!v) {
    console.error(`${name} is not set: PINSTORE_URL=http://127.0.0.1:8080 PINSTORE_TOKEN=<token with read and write> tsx <script>`);
    process.exit(2);
  }
  return v;
}

export class Failure extends Error {}

export function check(cond: unknown, what: string): asserts cond {
  if (!cond) {
    throw new Failure(what);
  }
}

export function eq<T>(got: T, want: T, what: string): void {
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  check(g === w, `${what}: got ${g}, want ${w}`);
}

// isID: an ID as it travels, a decimal string of 1 to 19 digits.
export function isID(v: unknown): v is string {
  return typeof v === "string" && /^[1-9][0-9]{0,18}$/.test(v);
}

export function isTime(v: unknown): v is string {
  return typeof v === "string" && !Number.isNaN(Date.parse(v));
}

export function isCount(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v) && v >= 0;
}

type Result<D, E> = { data?: D; error?: E; response: Response };

// ok checks the status of a success and returns its body.
export function ok<D, E>(r: Result<D, E>, status: number, what: string): D {
  check(r.response.status === status, `${what}: status ${r.response.status}, want ${status}: ${JSON.stringify(r.error ?? r.data)}`);
  check(r.data !== undefined, `${what}: no body`);
  return r.data;
}

// done checks a success without a body (204).
export function done<D, E>(r: Result<D, E>, what: string): void {
  check(r.response.status === 204, `${what}: status ${r.response.status}, want 204: ${JSON.stringify(r.error ?? r.data)}`);
}

// The fields of a problem document both specs name.
export type ProblemFields = { type: string; title: string; status: number; code: string; detail?: string; request_id?: string };

// fails checks an error's status and code, that its type links to the
// code's section of /docs, and returns the problem.
export function fails<D, E extends ProblemFields>(r: Result<D, E>, status: number, code: string, what: string): E {
  check(r.response.status === status, `${what}: status ${r.response.status}, want ${status}`);
  check(r.response.headers.get("Content-Type") === "application/problem+json", `${what}: Content-Type ${r.response.headers.get("Content-Type")}`);
  const p = r.error;
  check(p !== undefined && typeof p === "object", `${what}: no problem document`);
  eq(p.code, code, `${what}: code`);
  eq(p.status, status, `${what}: problem status`);
  check(typeof p.title === "string" && p.title !== "", `${what}: problem title ${JSON.stringify(p.title)}`);
  eq(new URL(p.type, baseUrl + "/").href, `${baseUrl}/docs#tag/errors/${code}`, `${what}: problem type resolved against the server`);
  eq(p.request_id, r.response.headers.get("X-Request-Id") ?? undefined, `${what}: request_id`);
  return p;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// eventually retries f until it returns without throwing, for what the
// server does moments after a request (the feed's fan-out).
export async function eventually<T>(what: string, f: () => Promise<T>, timeoutMs = 15000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await f();
    } catch (e) {
      if (!(e instanceof Failure) || Date.now() > deadline) {
        throw e instanceof Failure ? new Failure(`${what} (after ${timeoutMs} ms): ${e.message}`) : e;
      }
    }
    await sleep(50);
  }
}

// run runs the steps in order, stops at the first that fails, prints what
// happened and exits.
export async function run(name: string, steps: Array<[string, () => Promise<void>]>): Promise<never> {
  let passed = 0;
  let failed = 0;
  console.log(`${name}: ${steps.length} steps against ${baseUrl}`);
  for (const [what, step] of steps) {
    const start = Date.now();
    try {
      await step();
      passed++;
      console.log(`ok   ${what} (${Date.now() - start} ms)`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${what}: ${e instanceof Failure ? e.message : e instanceof Error ? e.stack : String(e)}`);
      break;
    }
  }
  const skipped = steps.length - passed - failed;
  console.log(`${name}: ${passed} passed, ${failed} failed` + (skipped > 0 ? `, ${skipped} skipped` : ""));
  process.exit(failed > 0 || skipped > 0 ? 1 : 0);
}
