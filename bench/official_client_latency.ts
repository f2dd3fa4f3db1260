// Round-trip latency through the official RivetKit client (rivetkit/client) against a
// running perdure server: `handle.getState()` of the seed's progressActor
//
//   - over HTTP, through the query gateway (a getOrCreate handle: what `handle.getState()`
//     does by default) and through the direct gateway (a getForId handle);
//   - over a connection (`conn.getState()` on one WebSocket);
//
// sequentially, `--calls` calls after `--warmup` calls, in each encoding asked for. Prints
// one JSON line per measurement (times in microseconds).
//
// Run it with bench/official_client_latency.py, which starts the server; by hand:
//   cd tests/scenarios/compat && npm ci
//   perdure serve examples.app:registry --port 6420 &
//   cd tests/scenarios/compat && node --import tsx ../../../bench/official_client_latency.ts http://127.0.0.1:6420
//
// rivetkit is installed in tests/scenarios/compat (the compatibility suite's package), so it is
// loaded from there. bench/ has no package.json, so this file runs as CommonJS: no
// top-level await.

import { createRequire } from "node:module";
import { join } from "node:path";
import { parseArgs } from "node:util";

const fromCompat = createRequire(join(__dirname, "..", "tests", "scenarios", "compat", "package.json"));
const { createClient } = fromCompat("rivetkit/client");

const { positionals, values } = parseArgs({
	allowPositionals: true,
	options: {
		calls: { type: "string", default: "1000" },
		warmup: { type: "string", default: "1000" },
		encodings: { type: "string", default: "bare,json" },
	},
});
const endpoint = positionals[0] ?? "http://127.0.0.1:6420";
const calls = Number(values.calls);
const warmup = Number(values.warmup);
const encodings = String(values.encodings).split(",");

function percentile(sorted: number[], p: number): number {
	const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
	return sorted[Math.max(0, index)];
}

async function measure(call: () => Promise<unknown>): Promise<Record<string, number>> {
	for (let i = 0; i < warmup; i++) await call();
	const samples: number[] = [];
	for (let i = 0; i < calls; i++) {
		const started = process.hrtime.bigint();
		await call();
		samples.push(Number(process.hrtime.bigint() - started) / 1000);
	}
	samples.sort((a, b) => a - b);
	const mean = samples.reduce((sum, value) => sum + value, 0) / samples.length;
	const round = (value: number) => Math.round(value * 10) / 10;
	return {
		calls,
		p50_us: round(percentile(samples, 50)),
		p90_us: round(percentile(samples, 90)),
		p99_us: round(percentile(samples, 99)),
		mean_us: round(mean),
		per_second: Math.round(1e6 / mean),
	};
}

async function main(): Promise<void> {
	for (const encoding of encodings) {
		const client = createClient({ endpoint, encoding });
		const handle = client.progressActor.getOrCreate([`bench-${encoding}`]);
		const state = await handle.getState();
		if (typeof state?.sum !== "number") throw new Error(`unexpected state ${JSON.stringify(state)}`);
		const byId = client.progressActor.getForId(await handle.resolve());
		const conn = handle.connect();
		await conn.ready;

		const report = (route: string, result: Record<string, number>) =>
			console.log(JSON.stringify({ encoding, route, ...result }));
		report("http-query-gateway", await measure(() => handle.getState()));
		report("http-direct-gateway", await measure(() => byId.getState()));
		report("connection", await measure(() => conn.getState()));
		await client.dispose();
	}
}

main().then(
	() => process.exit(0),
	(error) => {
		console.error(error);
		process.exit(1);
	},
);
