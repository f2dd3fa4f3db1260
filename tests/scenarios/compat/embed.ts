// The official RivetKit client against perdure mounted in a host app at a prefix
// (docs/embedding.md), the endpoint ending in the prefix:
//   node --import tsx embed.ts http://127.0.0.1:PORT/perdure <json|cbor|bare>
// Run by tests/scenarios/embed/test_mounted.py against tests/scenarios/embed/host.py,
// which serves tests/support/apps/compat.py's registry.

import { createClient } from "rivetkit/client";
import { assert, check, finish, waitFor } from "./lib/harness.ts";

const [endpoint, encoding] = process.argv.slice(2);
if (!endpoint || !["json", "cbor", "bare"].includes(encoding ?? "")) {
	console.error("usage: embed.ts <endpoint> <json|cbor|bare>");
	process.exit(2);
}
const run = `${encoding}-${Date.now().toString(36)}`;
const key = (name: string): string => `${name}-${run}`;
const client: any = createClient({ endpoint, encoding: encoding as any });
const counter = client.compatCounter.getOrCreate([key("counter")]);

await check("mounted-metadata", "GET {prefix}/metadata: perdure answers under the prefix", async () => {
	const response = await fetch(`${endpoint}/metadata`);
	assert.equal(response.status, 200);
	assert.equal((await response.json()).runtime, "perdure");
});

await check("mounted-http-action", "an action over HTTP: {prefix}/gateway/{name}/action/…", async () => {
	assert.equal(await counter.increment(2), 2);
});

await check("mounted-connection", "a connection: {prefix}/gateway/{name}/connect, actions and events", async () => {
	const conn = counter.connect();
	const got: unknown[] = [];
	conn.on("newCount", (count: unknown) => got.push(count));
	await conn.ready;
	assert.equal(await conn.increment(3), 5);
	await waitFor(() => got.includes(5), 5000, "the newCount event");
	await conn.dispose();
	return got;
});

await check("mounted-management", "create() (POST {prefix}/actors), then getForId (direct gateway)", async () => {
	const handle = await client.compatCounter.create([key("created")]);
	const actorId = await handle.resolve();
	assert.equal(await client.compatCounter.getForId(actorId).increment(1), 1);
	// skipReadyWait connects by id through {prefix}/connect and the rivet_actor subprotocol.
	const conn = client.compatCounter.getForId(actorId).connect(undefined, { skipReadyWait: true });
	assert.equal(await conn.increment(1), 2);
	await conn.dispose();
	return { actorId };
});

const raw = client.compatRaw.getOrCreate([key("raw")]);

await check("mounted-raw-fetch", "handle.fetch() reaches on_request under the prefix", async () => {
	const added = await raw.fetch("/add", {
		method: "POST",
		headers: { "content-type": "application/json" },
		body: JSON.stringify({ by: 3 }),
	});
	assert.equal(added.status, 200);
	assert.deepEqual(await added.json(), { count: 3 });
	const echo = await raw.fetch("/some/path?a=1");
	const seen = await echo.json();
	assert.equal(seen.path, "/some/path", "the handler sees its own path, not the prefix");
	assert.equal(seen.query, "a=1");
	return seen;
});

await check("mounted-raw-websocket", "handle.webSocket() reaches on_websocket under the prefix", async () => {
	const ws = await raw.webSocket("/room");
	const got: string[] = [];
	ws.addEventListener("message", (event: any) => got.push(String(event.data)));
	await waitFor(() => got.length >= 1, 5000, "the greeting");
	ws.send("add");
	await waitFor(() => got.length >= 2, 5000, "the count");
	ws.close();
	assert.deepEqual(got, ["hello /room", "count 4"]);
	return got;
});

finish();
