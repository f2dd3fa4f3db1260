// A tiny check runner for the compatibility programs.
//
// Every check prints one JSON line on stdout:
//   {"check": "<id>", "ok": true|false, "ms": <duration>, "title": "...", "detail"?: ..., "error"?: "..."}
// and the program ends with {"done": true, "passed": n, "failed": m}. The Python runner
// (test_official_client.py) parses these lines; anything else on stdout (client logs) is
// ignored.
//
// The runner also answers control requests over stdin: the program prints
// {"control": "restart-server"} and waits for the line {"control": "restarted"} (the
// server was stopped with SIGTERM and started again on the same port and data).

import assert from "node:assert/strict";
import { createInterface, type Interface } from "node:readline";
import { inspect } from "node:util";

export { assert };

const CHECK_TIMEOUT_MS = 30_000;
const CONTROL_TIMEOUT_MS = 45_000;

type Outcome = { passed: number; failed: number };
const outcome: Outcome = { passed: 0, failed: 0 };

function emit(line: Record<string, unknown>): void {
	process.stdout.write(`${JSON.stringify(line, jsonSafe)}\n`);
}

function jsonSafe(_key: string, value: unknown): unknown {
	if (typeof value === "bigint") return `${value}n`;
	if (value instanceof Uint8Array) return `Uint8Array(${Array.from(value).join(",")})`;
	if (value === undefined) return "undefined";
	return value;
}

/** Sleep `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
	return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Reject after `ms` milliseconds unless `promise` settles first. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
	let timer: NodeJS.Timeout | undefined;
	const timeout = new Promise<never>((_, reject) => {
		timer = setTimeout(() => reject(new Error(`${what}: no answer after ${ms} ms`)), ms);
	});
	try {
		return await Promise.race([promise, timeout]);
	} finally {
		clearTimeout(timer);
	}
}

/** Poll `condition` every 10 ms until it is true; fail after `ms` milliseconds. */
export async function waitFor(condition: () => boolean, ms: number, what: string): Promise<void> {
	const deadline = Date.now() + ms;
	while (!condition()) {
		if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
		await sleep(10);
	}
}

/** The error a promise rejects with; fails if it resolves. */
export async function rejection(promise: Promise<unknown>, what: string): Promise<any> {
	let value: unknown;
	try {
		value = await promise;
	} catch (error) {
		return error;
	}
	throw new Error(`${what}: expected an error, got ${inspect(value)}`);
}

/** Assert that `error` is a RivetKit error with this group and code; returns it. */
export function assertRivetError(error: any, group: string, code: string): any {
	assert.ok(error instanceof Error, `expected an Error, got ${inspect(error)}`);
	assert.equal(
		`${error.group}.${error.code}`,
		`${group}.${code}`,
		`error ${inspect(error.message)} has the wrong group.code`,
	);
	return error;
}

/** The public fields of a RivetKit error, for a check's detail. */
export function errorFields(error: any): Record<string, unknown> {
	return { group: error?.group, code: error?.code, message: error?.message, metadata: error?.metadata };
}

/** Run one check; its function may return a detail to print. Never throws. */
export async function check(id: string, title: string, fn: () => Promise<unknown>): Promise<void> {
	const started = performance.now();
	try {
		const detail = await withTimeout(fn(), CHECK_TIMEOUT_MS, id);
		outcome.passed += 1;
		emit({ check: id, ok: true, ms: Math.round(performance.now() - started), title, detail });
	} catch (error) {
		outcome.failed += 1;
		const message = error instanceof Error ? (error.stack ?? error.message) : inspect(error);
		emit({
			check: id,
			ok: false,
			ms: Math.round(performance.now() - started),
			title,
			error: message,
			fields: error instanceof Error ? errorFields(error) : undefined,
		});
	}
}

let lines: Interface | undefined;
const pending: string[] = [];
const waiters: ((line: string) => void)[] = [];

function nextLine(): Promise<string> {
	if (lines === undefined) {
		lines = createInterface({ input: process.stdin });
		lines.on("line", (line) => {
			const waiter = waiters.shift();
			if (waiter) waiter(line);
			else pending.push(line);
		});
	}
	const line = pending.shift();
	if (line !== undefined) return Promise.resolve(line);
	return new Promise((resolve) => waiters.push(resolve));
}

/** Ask the runner to restart the server (SIGTERM, then start on the same port and data). */
export async function restartServer(): Promise<void> {
	emit({ control: "restart-server" });
	const line = await withTimeout(nextLine(), CONTROL_TIMEOUT_MS, "restart-server");
	const answer = JSON.parse(line) as { control?: string; error?: string };
	if (answer.control !== "restarted") {
		throw new Error(`the runner could not restart the server: ${answer.error ?? line}`);
	}
}

/** Print the summary and exit (the client's sockets and timers would keep Node alive). */
export function finish(): never {
	emit({ done: true, ...outcome });
	lines?.close();
	process.exit(outcome.failed === 0 ? 0 : 1);
}
