// The official RivetKit client (rivetkit/client) through HAProxy in front of a perdure
// cluster, in one encoding. Run by test_balancer.py with tests/scenarios/compat's runner:
//
//   node --import tsx ../cluster/balancer.mts <endpoint> <encoding> before <tag> <home> <nodes>
//   node --import tsx ../cluster/balancer.mts <endpoint> <encoding> after <tag>
//
// <endpoint> is the balancer, with <nodes> nodes behind it. "before": the actors are
// woken first on <home> (one node, directly), so they live there; then actions, queue sends with wait and events go
// through the balancer, which spreads them over every node (the others forward to
// <home>). The test then kills <home> with SIGKILL and runs "after": the same actors,
// through the balancer, answer again once a surviving node has taken them over (each
// check retries, bounded, while the dead node's leases run out).

import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { assert, check, finish, sleep, waitFor } from "../compat/lib/harness.ts";

type Encoding = "json" | "cbor" | "bare";

const [endpoint, encodingArg, phase, tag, home, nodesArg] = process.argv.slice(2);
if (
	!endpoint ||
	!["json", "cbor", "bare"].includes(encodingArg ?? "") ||
	!["before", "after"].includes(phase ?? "") ||
	!tag ||
	(phase === "before" && !(home && Number(nodesArg) > 0))
) {
	console.error("usage: balancer.mts <endpoint> <json|cbor|bare> <before|after> <tag> [<home> <nodes>]");
	process.exit(2);
}
const encoding = encodingArg as Encoding;

/** `rivetkit/client` as suite.ts imports it (the ESM build), from tests/scenarios/compat's packages
 * (this file lives outside tests/scenarios/compat, so a bare import would not find them). */
async function importFromCompat(name: string, subpath: string): Promise<any> {
	const compat = createRequire(new URL("../compat/package.json", import.meta.url));
	for (const dir of compat.resolve.paths(name) ?? []) {
		const manifest = join(dir, name, "package.json");
		if (!existsSync(manifest)) continue;
		const entry = JSON.parse(readFileSync(manifest, "utf8")).exports[subpath].import.default;
		return import(pathToFileURL(join(dir, name, entry)).href);
	}
	throw new Error(`${name} is not installed in tests/scenarios/compat: run npm ci there`);
}

const { createClient } = await importFromCompat("rivetkit", "./client");
const client: any = createClient({ endpoint, encoding });
const counter = client.compatCounter.getOrCreate([`counter-${tag}`]);
const worker = client.compatWorker.getOrCreate([`worker-${tag}`]);

/** `fn` until it succeeds, for at most `ms`; the detail says how many attempts it took. */
async function retrying<T>(ms: number, fn: () => Promise<T>): Promise<{ value: T; attempts: number; errors: string[] }> {
	const deadline = Date.now() + ms;
	const errors: string[] = [];
	for (let attempts = 1; ; attempts++) {
		try {
			return { value: await fn(), attempts, errors: errors.slice(-5) };
		} catch (error: any) {
			errors.push(error?.group ? `${error.group}.${error.code}` : String(error?.message ?? error));
			if (Date.now() > deadline) throw new Error(`still failing after ${ms} ms: ${errors.slice(-5)}`);
			await sleep(200);
		}
	}
}

/** A connection to `handle` collecting `newCount`, subscribed once `getState` answers. */
async function subscribed(handle: any): Promise<{ conn: any; got: unknown[] }> {
	const conn = handle.connect();
	const got: unknown[] = [];
	conn.on("newCount", (count: unknown) => got.push(count));
	await conn.ready;
	await conn.getState(); // the subscription went first on the same socket
	return { conn, got };
}

/** Node ids that answered `GET /health` through the balancer, `n` times. */
async function nodesBehind(n: number): Promise<string[]> {
	const ids: string[] = [];
	for (let i = 0; i < n; i++) {
		const body = await (await fetch(`${endpoint}/health`)).json();
		ids.push(body.node?.id ?? "?");
	}
	return ids;
}

if (phase === "before") {
	await check("wake-on-home", "the actors are woken on one node, directly (they live there)", async () => {
		const direct: any = createClient({ endpoint: home, encoding });
		try {
			const pinned = direct.compatCounter.getOrCreate([`counter-${tag}`]);
			assert.equal((await pinned.getState()).count, 0);
			assert.deepEqual(await direct.compatWorker.getOrCreate([`worker-${tag}`]).getState(), { done: 0 });
			return (await (await fetch(`${home}/health`)).json()).node;
		} finally {
			await direct.dispose();
		}
	});

	await check("round-robin", "the balancer spreads requests over every node", async () => {
		const ids = await nodesBehind(2 * Number(nodesArg));
		assert.equal(new Set(ids).size, Number(nodesArg), `nodes that answered: ${ids}`);
		return ids;
	});

	await check("actions", "actions through the balancer, from every node, reach the one actor", async () => {
		const counts = [];
		for (let i = 0; i < 6; i++) counts.push(await counter.increment(1));
		assert.deepEqual(counts, [1, 2, 3, 4, 5, 6]);
		assert.equal((await counter.getState()).count, 6);
	});

	await check("queue-send-wait", "queue sends with wait through the balancer complete", async () => {
		const results = [];
		for (const body of [1, 2, 3]) results.push(await worker.send("jobs", body, { wait: true, timeout: 5000 }));
		assert.deepEqual(results, [1, 2, 3].map((n) => ({ status: "completed", response: n * 2 })));
		assert.deepEqual(await worker.getState(), { done: 6 });
	});

	await check("events", "a WebSocket connection through the balancer receives the actor's events", async () => {
		const { conn, got } = await subscribed(counter);
		const counts = [];
		for (let i = 0; i < 3; i++) counts.push(await counter.increment(1)); // over HTTP, any node
		counts.push(await conn.increment(1)); // over the socket
		await waitFor(() => got.length === 4, 5000, "four events");
		assert.deepEqual(got, [7, 8, 9, 10]);
		assert.deepEqual(counts, [7, 8, 9, 10]);
		await conn.dispose();
	});
} else {
	const TAKEOVER_MS = 10_000;

	await check("takeover-action", "after the actor's node was killed, an action succeeds (bounded retries)", async () => {
		const started = Date.now();
		const { value, attempts, errors } = await retrying(TAKEOVER_MS, () => counter.increment(1));
		assert.equal(value, 11, "the state survived, and the increment applied once");
		return { ms: Date.now() - started, attempts, errors, nodes: await nodesBehind(4) };
	});

	await check("takeover-queue-send-wait", "a queue send with wait succeeds on the taken-over worker", async () => {
		const { value, attempts, errors } = await retrying(TAKEOVER_MS, () =>
			worker.send("jobs", 4, { wait: true, timeout: 5000 }),
		);
		assert.deepEqual(value, { status: "completed", response: 8 });
		assert.deepEqual(await worker.getState(), { done: 10 });
		return { attempts, errors };
	});

	await check("takeover-events", "a new connection receives events from the taken-over actor", async () => {
		const { value } = await retrying(TAKEOVER_MS, () => subscribed(counter));
		const { conn, got } = value;
		const counts = [await counter.increment(1), await counter.increment(1), await conn.increment(1)];
		await waitFor(() => got.length === 3, 5000, "three events");
		assert.deepEqual(got, counts);
		assert.deepEqual(counts, [12, 13, 14]);
		await conn.dispose();
	});

	await check("survivors-answer", "every request through the balancer succeeds with one node dead", async () => {
		for (let i = 0; i < 12; i++) assert.equal((await counter.getState()).count, 14);
		return { nodes: await nodesBehind(6) };
	});
}

await client.dispose();
finish();
