// The official RivetKit client (rivetkit/client, JSON) as a subscriber of one actor's
// events through one node, for test_failover.py:
//
//   node --import tsx ../cluster/subscriber.mts <endpoint> <actor> <key> <event>
//
// Prints `{"ready": true}` once the connection is open, then one line per event,
// `{"event": <args>}`, and `{"status": <connStatus>}` when it changes; runs until killed
// (SIGTERM). The client reconnects by itself, to the same endpoint, when its socket
// closes.

import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [endpoint, actor, key, event] = process.argv.slice(2);
if (!endpoint || !actor || !key || !event) {
	console.error("usage: subscriber.mts <endpoint> <actor> <key> <event>");
	process.exit(2);
}

/** `rivetkit/client` from tests/scenarios/compat's packages (as balancer.mts does). */
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
const client: any = createClient({ endpoint, encoding: "json" });
const conn = client[actor].getOrCreate([key]).connect();
conn.on(event, (...args: unknown[]) => console.log(JSON.stringify({ event: args })));
conn.onError((error: any) =>
	console.log(JSON.stringify({ error: `${error?.group ?? ""}.${error?.code ?? ""} ${error?.message ?? error}` })),
);
let status = "";
setInterval(() => {
	if (conn.connStatus !== status) {
		status = conn.connStatus;
		console.log(JSON.stringify({ status }));
	}
}, 20);
await conn.ready;
console.log(JSON.stringify({ ready: true }));
process.on("SIGTERM", () => process.exit(0));
