// The official RivetKit client against a perdure server started with a token
// (perdure serve tests.scenarios.edge.access_app:registry --token TOKEN):
//   node --import tsx access.ts <endpoint> <json|cbor|bare> <token>
// Run by tests/scenarios/edge/test_token_official_client.py. Checks the server token over HTTP,
// the management API and WebSocket, and the can_subscribe / can_publish hooks.

import { createClient } from "rivetkit/client";
import { assert, assertRivetError, check, errorFields, finish, rejection, waitFor } from "./lib/harness.ts";

const [endpoint, encoding, token] = process.argv.slice(2);
if (!endpoint || !["json", "cbor", "bare"].includes(encoding ?? "") || !token) {
	console.error("usage: access.ts <endpoint> <json|cbor|bare> <token>");
	process.exit(2);
}
const run = `${encoding}-${Date.now().toString(36)}`;
const key = (name: string): string => `${name}-${run}`;

const client: any = createClient({ endpoint, encoding: encoding as any, token });
// Without a token the metadata lookup would retry forever: the checks go straight on.
const anonymous: any = createClient({ endpoint, encoding: encoding as any, disableMetadataLookup: true });
const impostor: any = createClient({
	endpoint,
	encoding: encoding as any,
	token: "not-the-token-0123456789",
	disableMetadataLookup: true,
});

await check("token-http-action", "an action over HTTP with the token (query gateway)", async () => {
	const seen = await client.guarded.getOrCreate([key("http")]).whoami();
	assert.equal(seen.action.transport, "http");
	assert.equal(seen.connect.transport, "http");
	return seen;
});

await check("token-direct-and-management", "create (POST /actors) and getForId (direct gateway)", async () => {
	const handle = await client.guarded.create([key("created")]);
	const actorId = await handle.resolve();
	assert.equal(await client.guarded.getForId(actorId).ping(), "pong");
});

await check("token-connection", "a connection with the token: actions and events", async () => {
	const conn = client.guarded.getOrCreate([key("conn")]).connect();
	const got: unknown[] = [];
	conn.on("news", (text: unknown) => got.push(text));
	await conn.ready;
	const seen = await conn.whoami();
	assert.equal(seen.action.transport, "websocket");
	assert.equal(await conn.ping(), "pong");
	await waitFor(() => got.length > 0, 5000, "the news event");
	assert.deepEqual(got, ["hello"]);
	await conn.dispose();
});

await check("token-missing-refused", "no token: auth.unauthorized", async () => {
	const error = await rejection(anonymous.guarded.getOrCreate([key("anon")]).whoami(), "whoami");
	assertRivetError(error, "auth", "unauthorized");
	return errorFields(error);
});

await check("token-wrong-refused", "a wrong token: auth.forbidden", async () => {
	const error = await rejection(impostor.guarded.getOrCreate([key("anon")]).whoami(), "whoami");
	assertRivetError(error, "auth", "forbidden");
});

await check("token-missing-connection-refused", "a connection without the token gets auth.unauthorized", async () => {
	const conn = anonymous.guarded.getOrCreate([key("anon-conn")]).connect();
	const errors: unknown[] = [];
	conn.onError((error: unknown) => errors.push(error));
	await waitFor(() => errors.length > 0, 5000, "onError");
	assertRivetError(errors[0], "auth", "unauthorized");
	await conn.dispose();
});

await check("can-subscribe-refused", "canSubscribe refusing: auth.forbidden on onError, socket usable", async () => {
	const conn = client.guarded.getOrCreate([key("secret")]).connect();
	const errors: unknown[] = [];
	conn.onError((error: unknown) => errors.push(error));
	await conn.ready;
	conn.on("secret_news", () => {});
	await waitFor(() => errors.length > 0, 5000, "onError for the refused subscription");
	assertRivetError(errors[0], "auth", "forbidden");
	assert.equal(await conn.ping(), "pong");
	await conn.dispose();
});

await check("can-publish-refused", "canPublish refusing a queue send: auth.forbidden", async () => {
	const handle = client.guarded.getOrCreate([key("publish")]);
	const error = await rejection(handle.send("secret_jobs", 1), "send");
	assertRivetError(error, "auth", "forbidden");
	await handle.send("jobs", 1);
});

await client.dispose();
finish();
